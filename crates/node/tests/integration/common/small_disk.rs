//! A small file system of its own for a test: a tmpfs of a given size, to be filled up so
//! that the disk is full. Mounting needs root (the CI runs as root); without the rights
//! a test that needs one says so and is skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A tmpfs of `size` bytes mounted on a directory of its own; unmounted when dropped.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// None (the test is skipped, saying so) where this process may not mount.
    pub fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!(
                "skipped: this test needs a small file system of its own, and mounting a tmpfs \
                 needs root (the CI runs as root)"
            );
            return None;
        }
        Some(SmallDisk { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file until the disk is full; returns its path.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let p = self.path().join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let chunk = vec![0xffu8; 64 << 10];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        p
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
