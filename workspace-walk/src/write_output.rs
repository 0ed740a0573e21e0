//! Writing a file a check names (a screenshot): a relative path beneath the check's directory,
//! following no symlink, its missing directories made; an absolute one into its directory as
//! named, never through a symlink at the file itself.

use std::io;
use std::path::{Path, PathBuf};

use crate::beneath::{BeneathError, RootDir};

/// What failed and why (`what` names the step, e.g. "writing shots/a.png").
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct OutputWriteError {
    pub what: String,
    #[source]
    pub source: io::Error,
}

fn failed(what: String) -> impl FnOnce(BeneathError) -> OutputWriteError {
    move |e| OutputWriteError {
        what,
        source: e.into(),
    }
}

/// Write `bytes` at `path`: beneath `cwd` when relative, as named when absolute (see the
/// module doc).
pub fn write_output_file(cwd: &Path, path: &Path, bytes: &[u8]) -> Result<(), OutputWriteError> {
    let (root, rel) = if path.is_absolute() {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(OutputWriteError {
                what: format!("writing {}", path.display()),
                source: io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
            });
        };
        std::fs::create_dir_all(dir).map_err(|source| OutputWriteError {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        (dir.to_path_buf(), PathBuf::from(name))
    } else {
        (cwd.to_path_buf(), path.to_path_buf())
    };
    let root = RootDir::open(&root).map_err(failed(format!("opening {}", root.display())))?;
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        root.create_dir_all(parent)
            .map_err(failed(format!("creating {}", parent.display())))?;
    }
    root.write(&rel, bytes)
        .map_err(failed(format!("writing {}", path.display())))
}
