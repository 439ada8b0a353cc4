//! dbus: [`SystemdUnits`] over systemd's D-Bus API with libcgroups' native client (pure Rust
//! over the system bus socket, blocking, EXTERNAL authentication: no libdbus, no async
//! runtime). One connection per operation: they are rare (a pod created or removed) and a
//! connection never outlives a restart of the bus or of systemd.

use libcgroups::systemd::dbus_native::client::SystemdClient;
use libcgroups::systemd::dbus_native::dbus::DbusConnection;
use libcgroups::systemd::dbus_native::serialize::{Structure, Variant};

use super::systemd::{SystemdError, SystemdUnits, UnitProperties, UnitValue};

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

fn connect(unit: &str, action: &'static str) -> Result<DbusConnection, SystemdError> {
    DbusConnection::new_system().map_err(|e| SystemdError::Unit {
        unit: unit.to_string(),
        action,
        message: format!("connecting to the system bus: {e}"),
    })
}

impl SystemdUnits for DbusUnits {
    fn unit_exists(&self, unit: &str) -> bool {
        connect(unit, "GetUnit").is_ok_and(|c| c.transient_unit_exists(unit))
    }

    fn start_transient(&self, unit: &str, properties: &UnitProperties) -> Result<(), SystemdError> {
        let conn = connect(unit, "StartTransientUnit")?;
        let props = properties
            .iter()
            .map(|(k, v)| Structure::new((*k).to_string(), variant(v)))
            .collect();
        conn.proxy("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
            .start_transient_unit(unit, "replace", props, vec![])
            .map(|_job| ())
            .map_err(|e| SystemdError::Unit {
                unit: unit.to_string(),
                action: "StartTransientUnit",
                message: e.to_string(),
            })
    }

    fn set_properties(&self, unit: &str, properties: &UnitProperties) -> Result<(), SystemdError> {
        let conn = connect(unit, "SetUnitProperties")?;
        let props = properties.iter().map(|(k, v)| (*k, variant(v))).collect();
        conn.set_unit_properties(unit, &props)
            .map_err(|e| SystemdError::Unit {
                unit: unit.to_string(),
                action: "SetUnitProperties",
                message: e.to_string(),
            })
    }

    fn stop(&self, unit: &str) -> Result<(), SystemdError> {
        let conn = connect(unit, "StopUnit")?;
        conn.stop_transient_unit(unit)
            .map_err(|e| SystemdError::Unit {
                unit: unit.to_string(),
                action: "StopUnit",
                message: e.to_string(),
            })
    }
}
