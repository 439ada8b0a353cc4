//! dbus: [`SystemdUnits`] over systemd's D-Bus API with libcgroups' native client (pure Rust
//! over the system bus socket, blocking, EXTERNAL authentication: no libdbus, no async
//! runtime). One connection per operation: they are rare (a pod created or removed) and a
//! connection never outlives a restart of the bus or of systemd.

use libcgroups::systemd::dbus_native::client::SystemdClient;
use libcgroups::systemd::dbus_native::dbus::DbusConnection;
use libcgroups::systemd::dbus_native::serialize::{Structure, Variant};

use super::{SystemdError, SystemdUnits, UnitProperties, UnitValue};

/// systemd's units, reached on the system bus.
#[derive(Debug, Default, Clone, Copy)]
pub struct DbusUnits;

fn variant(v: &UnitValue) -> Variant {
    match v {
        UnitValue::Str(s) => Variant::String(s.clone()),
        UnitValue::Bool(b) => Variant::Bool(*b),
        UnitValue::U64(n) => Variant::U64(*n),
    }
}

/// Maps a failed call: systemd's "already loaded" (`UnitExists`) and "not loaded"/"not found"
/// (`NoSuchUnit`) replies become their own variants (the native client keeps only the
/// message; systemd's wording of both has been the same since 2013).
fn call_error(unit: &str, action: &'static str, message: String) -> SystemdError {
    if message.contains("already loaded") || message.contains("UnitExists") {
        SystemdError::UnitExists {
            unit: unit.to_string(),
        }
    } else if message.contains(" not loaded")
        || message.contains(" not found")
        || message.contains("NoSuchUnit")
    {
        SystemdError::NoSuchUnit {
            unit: unit.to_string(),
        }
    } else {
        SystemdError::Unit {
            unit: unit.to_string(),
            action,
            message,
        }
    }
}

fn connect(unit: &str, action: &'static str) -> Result<DbusConnection, SystemdError> {
    DbusConnection::new_system().map_err(|e| SystemdError::Unit {
        unit: unit.to_string(),
        action,
        message: format!("connecting to the system bus: {e}"),
    })
}

impl SystemdUnits for DbusUnits {
    fn start_transient(&self, unit: &str, properties: &UnitProperties) -> Result<(), SystemdError> {
        let conn = connect(unit, "StartTransientUnit")?;
        let props = properties
            .iter()
            .map(|(k, v)| Structure::new((*k).to_string(), variant(v)))
            .collect();
        conn.proxy("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
            .start_transient_unit(unit, "replace", props, vec![])
            .map(|_job| ())
            .map_err(|e| call_error(unit, "StartTransientUnit", e.to_string()))
    }

    fn set_properties(&self, unit: &str, properties: &UnitProperties) -> Result<(), SystemdError> {
        let conn = connect(unit, "SetUnitProperties")?;
        let props = properties.iter().map(|(k, v)| (*k, variant(v))).collect();
        conn.set_unit_properties(unit, &props)
            .map_err(|e| call_error(unit, "SetUnitProperties", e.to_string()))
    }

    fn stop(&self, unit: &str) -> Result<(), SystemdError> {
        let conn = connect(unit, "StopUnit")?;
        conn.stop_transient_unit(unit)
            .map_err(|e| call_error(unit, "StopUnit", e.to_string()))
    }
}
