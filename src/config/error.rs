//! [`ConfigError`], and where in the file a TOML error is: the key path from
//! serde_path_to_error, the line and column from toml's span.

use std::fmt;
use std::path::{Path, PathBuf};

/// A config that cannot be used, with the file, the field and (for TOML errors) the
/// position, so the message alone tells the user what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    file: PathBuf,
    position: Option<(usize, usize)>,
    field: Option<String>,
    message: String,
}

impl ConfigError {
    /// An error about `field` (a key path such as `peers[1].id`) of `file`.
    pub(super) fn new(file: &Path, field: Option<String>, message: String) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            position: None,
            field,
            message,
        }
    }

    /// Turns a TOML error into one line with position and key path.
    pub(super) fn from_toml(
        error: serde_path_to_error::Error<toml::de::Error>,
        text: &str,
        origin: &Path,
    ) -> Self {
        let path = error.path();
        let mut field = path.iter().next().is_some().then(|| path.to_string());
        let error = error.into_inner();
        let mut position = error.span().map(|s| line_column(text, s.start));
        // Syntax errors come on several lines ("invalid string\nexpected ..."); keep one.
        let mut message = error
            .message()
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        // serde reports a missing key on the table that lacks it; name the key itself.
        if let Some(key) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            let key = key.to_string();
            field = Some(match field {
                Some(table) => format!("{table}.{key}"),
                None => {
                    // The root table has no header to point at; 1:1 would mislead.
                    position = None;
                    key
                }
            });
            message = "required key is missing".to_string();
        }
        ConfigError {
            file: origin.to_path_buf(),
            position,
            field,
            message,
        }
    }

    /// The config file the error is about.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The offending key as a path such as `peers[1].id`, when one is known.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The 1-based line and column in the file, for TOML syntax and type errors.
    pub fn position(&self) -> Option<(usize, usize)> {
        self.position
    }

    /// What is wrong, without the file and field prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        match &self.field {
            // Messages from `Timing::validate` already open with the field name.
            Some(field) if !self.message.starts_with(field.as_str()) => {
                write!(f, ": {field}: {}", self.message)
            }
            _ => write!(f, ": {}", self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}
