//! Values quoted in logs and error messages: long enough to recognise,
//! never a flood.

/// A value cut for a log line or an error message: long enough to
/// recognise, never a flood.
pub(crate) fn truncated(value: &str, max_chars: usize) -> String {
    match value.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_owned(),
    }
}

/// How much of a loc log lines quote.
pub(crate) const LOGGED_LOC_CHARS: usize = 200;
