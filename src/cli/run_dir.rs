//! Where `local` and `chaos` keep their nodes' files: the folder the user named, or a
//! fresh temp folder that goes away at the end unless it is kept.

use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// The folder a run works in. Dropping it deletes a temp folder; [`RunDir::keep`]
/// leaves it for the user (a failed chaos run's evidence, `--keep-dir`).
pub struct RunDir {
    path: PathBuf,
    temp: Option<TempDir>,
}

impl RunDir {
    /// `given` if the user named a folder, else a new temp folder named `prefix…`.
    pub fn new(given: Option<&Path>, prefix: &str) -> std::io::Result<RunDir> {
        match given {
            Some(path) => Ok(RunDir {
                path: path.to_path_buf(),
                temp: None,
            }),
            None => {
                let temp = tempfile::Builder::new().prefix(prefix).tempdir()?;
                Ok(RunDir {
                    path: temp.path().to_path_buf(),
                    temp: Some(temp),
                })
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the folder in place and returns where it is.
    pub fn keep(self) -> PathBuf {
        match self.temp {
            Some(temp) => temp.keep(),
            None => self.path,
        }
    }

    /// Whether the folder was made here (and goes away unless kept).
    pub fn is_temporary(&self) -> bool {
        self.temp.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_folder_goes_unless_kept_and_a_named_one_is_never_made() {
        let gone = RunDir::new(None, "bully-test-").expect("temp");
        let path = gone.path().to_path_buf();
        assert!(path.is_dir() && gone.is_temporary());
        drop(gone);
        assert!(!path.exists());
        let kept = RunDir::new(None, "bully-test-").expect("temp").keep();
        assert!(kept.is_dir());
        std::fs::remove_dir(&kept).expect("clean up");
        let named = RunDir::new(Some(Path::new("/nonexistent/bully")), "x").expect("named");
        assert!(!named.is_temporary() && !named.path().exists());
    }
}
