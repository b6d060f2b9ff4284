//! Finding the project's shared traces (`shared/traces/NAME`), which live beside the
//! repository rather than in it: CI clones the repository with `shared/` as a sibling of
//! its root, and a worktree or a checkout elsewhere finds it further up. Every test and
//! tool that reads the shared CloudPhysics trace asks here, so the rule lives in one place.

use std::path::{Path, PathBuf};

/// `shared/traces/NAME` in `from` or the nearest of its ancestors that has it.
pub fn find_shared_trace(name: &str, from: &Path) -> Option<PathBuf> {
    from.ancestors()
        .map(|d| d.join("shared").join("traces").join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_up_to_the_nearest_ancestor_holding_it() {
        let root = tempfile::tempdir().unwrap();
        let traces = root.path().join("shared/traces");
        std::fs::create_dir_all(&traces).unwrap();
        std::fs::write(traces.join("t.bin"), b"x").unwrap();
        let deep = root.path().join("repo/crates/policy");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(
            find_shared_trace("t.bin", &deep),
            Some(traces.join("t.bin"))
        );
        assert_eq!(find_shared_trace("missing.bin", &deep), None);
    }
}
