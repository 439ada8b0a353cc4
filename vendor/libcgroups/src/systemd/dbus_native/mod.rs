// see https://dbus.freedesktop.org/doc/dbus-specification.html and
// https://dbus.freedesktop.org/doc/api/html/structDBusHeader.html

pub mod client;
pub mod dbus;
pub mod message;
pub mod proxy;
pub mod serialize;
pub mod utils;
