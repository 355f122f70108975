//! The SDK's error type: what operator code returns to fail its task.

use crate::bindings::weir::operator::types::ErrorCode;
use std::fmt;

/// An error that fails the task when returned from an [`crate::Operator`]
/// method. The host reports its message with the operator's uid and the
/// position of the input being processed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
}

/// `Result` with the SDK's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with this message.
    pub fn msg(message: impl Into<String>) -> Self {
        Error { message: message.into() }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn state(name: &str, code: ErrorCode) -> Self {
        Error::msg(format!("state '{name}': {}", describe(&code)))
    }

    pub(crate) fn codec(name: &str, what: &str, err: postcard::Error) -> Self {
        Error::msg(format!("state '{name}': cannot {what} value: {err}"))
    }
}

/// A sentence for an error code from the host.
pub(crate) fn describe(code: &ErrorCode) -> String {
    match code {
        ErrorCode::NotInOpen(s) => format!("states are registered only in open ({s})"),
        ErrorCode::KindMismatch(s) => format!("kind mismatch: {s}"),
        ErrorCode::InvalidName(s) => format!("invalid state name: {s}"),
        ErrorCode::NoCurrentKey => "no current key (keyed state and timers need a keyed input)".into(),
        ErrorCode::ReadOnly(s) => format!("read-only here: {s}"),
        ErrorCode::OutOfRange(i) => format!("element index {i} is past the batch"),
        ErrorCode::Backend(s) => format!("state backend failed: {s}"),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Error::msg(s)
    }
}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Error::msg(s)
    }
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Self {
        Error::msg(describe(&code))
    }
}

impl From<std::str::Utf8Error> for Error {
    fn from(e: std::str::Utf8Error) -> Self {
        Error::msg(format!("invalid UTF-8: {e}"))
    }
}

impl From<std::string::FromUtf8Error> for Error {
    fn from(e: std::string::FromUtf8Error) -> Self {
        Error::msg(format!("invalid UTF-8: {e}"))
    }
}
