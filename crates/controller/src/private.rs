//! The controller's files at rest: its store (`controller.db` and SQLite's `-wal` and
//! `-shm` beside it), its generated API token and the directory holding them are the
//! controller's alone: files mode 0600, the directory 0700.
//!
//! The store holds every registered node's API token in clear: the controller must send
//! it to the node (`Authorization: Bearer`) on every poll and reconcile, so it cannot keep
//! only a hash of it. What protects those tokens is these modes. A directory created here
//! is made 0700; an existing one the controller's own files are in (same owner, not a
//! shared sticky directory such as `/tmp`, nothing in it but the controller's files) is
//! tightened to 0700, with a log line; one it
//! cannot tighten is named in a warning. Files are created 0600 and tightened to 0600.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of the controller's files.
pub const FILE_MODE: u32 = 0o600;
/// The mode of the directory holding them.
pub const DIR_MODE: u32 = 0o700;

fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Creates `dir` (and its missing parents) mode 0700 if it is missing.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(|e| at(dir, e))
}

/// Creates `file` mode 0600 if it is missing, and sets an existing one to 0600.
pub fn file(file: &Path) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(file)
        .map_err(|e| at(file, e))?;
    tighten(file)
}

/// Sets `file` to 0600 if it exists and grants more.
pub fn tighten(file: &Path) -> io::Result<()> {
    match std::fs::metadata(file) {
        Ok(m) if m.mode() & 0o777 != FILE_MODE => {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(FILE_MODE))
                .map_err(|e| at(file, e))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(at(file, e)),
    }
}

/// Makes the directory of `file` (one of the controller's own files, which exists) 0700
/// if it grants anyone else access and is the controller's own: same owner as `file`,
/// not sticky, and holding only the controller's files (the store's, the token). A
/// shared directory is left alone with a warning.
pub fn tighten_dir_of(file: &Path) -> io::Result<()> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let d = std::fs::metadata(&dir).map_err(|e| at(&dir, e))?;
    let f = std::fs::metadata(file).map_err(|e| at(file, e))?;
    if d.mode() & 0o077 == 0 {
        return Ok(());
    }
    let own = |name: &std::ffi::OsStr| {
        let n = name.to_string_lossy();
        n.starts_with("controller.")
            || file
                .file_name()
                .is_some_and(|f| n.starts_with(&*f.to_string_lossy()))
    };
    let only_ours = std::fs::read_dir(&dir)
        .map_err(|e| at(&dir, e))?
        .all(|e| e.is_ok_and(|e| own(&e.file_name())));
    if d.uid() != f.uid() || d.mode() & 0o1000 != 0 || !only_ours {
        tracing::warn!(dir = %dir.display(), mode = format!("{:o}", d.mode() & 0o7777),
            "the controller's files are in a shared directory others may enter; they are 0600, but give them a directory of their own");
        return Ok(());
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(DIR_MODE))
        .map_err(|e| at(&dir, e))?;
    tracing::info!(dir = %dir.display(), was = format!("{:o}", d.mode() & 0o777), "the controller's directory made 0700");
    Ok(())
}

/// The SQLite files of the database at `db`: itself, `-wal`, `-shm`, `-journal`.
pub fn sqlite_files(db: &Path) -> Vec<PathBuf> {
    let mut out = vec![db.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        out.push(PathBuf::from(p));
    }
    out
}
