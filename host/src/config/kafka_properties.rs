//! The librdkafka properties a job file may not set: those that make
//! librdkafka load a library into the host, run a command, or write a file
//! it names. A job file is
//! not trusted (docs/security.md), so it must not run native code as the
//! host's user, whatever the broker.
//!
//! Checked when a job file is validated, for every source and sink entry's
//! `properties` table whatever its kind and whether this build has the
//! `kafka` feature (a host without it refuses them by name too), and again
//! by the Kafka connector before it builds a client. librdkafka matches
//! property names exactly and none of these has an alias
//! (`rdkafka_conf.c`), so an exact match is the whole check.

use thiserror::Error;

/// Properties that load a library into the host, run a command or write a
/// file, with
/// what librdkafka would do with them (librdkafka's CONFIGURATION.md).
const REFUSED: &[(&str, &str)] = &[
    ("plugin.library.paths", "librdkafka would load each library it names into the host (dlopen)"),
    ("ssl.engine.location", "OpenSSL would load the engine library it names into the host"),
    ("ssl.engine.id", "it names the OpenSSL engine to load into the host"),
    ("ssl.providers", "OpenSSL would load the provider modules it names into the host"),
    ("sasl.kerberos.kinit.cmd", "librdkafka would run it as a shell command (system(3)) as the host's user"),
    (
        "ssl.keylog.filename",
        "librdkafka would write the TLS session keys to the file it names, anywhere the host's user may write",
    ),
];

/// Properties librdkafka writes into the default kinit shell command
/// (`kinit ... -t "%{sasl.kerberos.keytab}" -k %{sasl.kerberos.principal}`):
/// only characters a shell takes as they are there.
const IN_KINIT_COMMAND: &[&str] = &["sasl.kerberos.principal", "sasl.kerberos.keytab"];

/// A property a job file may not set.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("properties.{name}: {why}; a job file may not set it")]
pub struct RefusedProperty {
    /// The property's name.
    pub name: String,
    /// Why.
    pub why: String,
}

/// Whether a job file may set librdkafka property `name` to `value`.
pub fn check(name: &str, value: &toml::Value) -> Result<(), RefusedProperty> {
    let refused = |why: String| Err(RefusedProperty { name: name.to_string(), why });
    if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
        return refused((*why).to_string());
    }
    if IN_KINIT_COMMAND.contains(&name)
        && let Some(text) = value.as_str()
        && let Some(c) = text.chars().find(|c| !shell_literal(*c))
    {
        return refused(format!(
            "{c:?} is not allowed: librdkafka writes the value into the kinit shell command, where only letters, \
             digits and / @ . _ - + = : , stand for themselves"
        ));
    }
    Ok(())
}

/// Every property of a `properties` table ([`check`]).
pub fn check_all(properties: &toml::Table) -> Result<(), RefusedProperty> {
    properties.iter().try_for_each(|(name, value)| check(name, value))
}

/// Whether `c` means itself to a shell, unquoted or in double quotes.
fn shell_literal(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '/' | '@' | '.' | '_' | '-' | '+' | '=' | ':' | ',')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(name: &str, value: &str) -> Result<(), RefusedProperty> {
        check(name, &toml::Value::String(value.into()))
    }

    #[test]
    fn properties_that_load_code_run_commands_or_write_files_are_refused_by_name() {
        for name in [
            "plugin.library.paths",
            "ssl.engine.location",
            "ssl.engine.id",
            "ssl.providers",
            "sasl.kerberos.kinit.cmd",
            "ssl.keylog.filename",
        ] {
            let e = checked(name, "touch /tmp/x").unwrap_err();
            assert_eq!(e.name, name);
            assert!(e.to_string().starts_with(&format!("properties.{name}: ")), "{e}");
            assert!(e.to_string().ends_with("a job file may not set it"), "{e}");
        }
        assert!(checked("sasl.kerberos.kinit.cmd", "").unwrap_err().why.contains("shell command"));
        // Names are matched exactly, as librdkafka does: another spelling
        // is no property of librdkafka's, which refuses it itself.
        assert_eq!(checked("security.protocol", "sasl_ssl"), Ok(()));
        assert_eq!(checked("linger.ms", "5"), Ok(()));
    }

    #[test]
    fn kerberos_values_that_reach_the_kinit_command_are_plain() {
        for good in ["kafkaclient", "weir/host-1.example.com@EXAMPLE.COM", "/etc/security/keytabs/weir.keytab"] {
            assert_eq!(checked("sasl.kerberos.principal", good), Ok(()), "{good}");
            assert_eq!(checked("sasl.kerberos.keytab", good), Ok(()), "{good}");
        }
        for bad in ["x; touch /tmp/x", "x$(id)", "x`id`", "a\" ; id ; \"", "x y", "x\ny", "x|y", "x&y", "x>y"] {
            let e = checked("sasl.kerberos.principal", bad).unwrap_err();
            assert!(e.to_string().contains("kinit shell command"), "{bad:?}: {e}");
            assert!(checked("sasl.kerberos.keytab", bad).is_err(), "{bad:?}");
        }
        // The service name is not in the command.
        assert_eq!(checked("sasl.kerberos.service.name", "a b"), Ok(()));
    }

    #[test]
    fn a_table_is_refused_at_its_first_bad_property() {
        let table: toml::Table =
            toml::from_str("\"linger.ms\" = 5\n\"sasl.kerberos.kinit.cmd\" = \"touch /tmp/x\"").unwrap();
        assert_eq!(check_all(&table).unwrap_err().name, "sasl.kerberos.kinit.cmd");
        assert_eq!(check_all(&toml::from_str("\"linger.ms\" = 5").unwrap()), Ok(()));
    }
}
