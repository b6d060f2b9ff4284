//! Helpers shared by the controller's integration tests.

/// A node's configuration: loopback NBD and API on ephemeral ports, a `size` cache at
/// `level`, its data in `dir`, and `exports` (TOML `[[export]]` tables) appended.
pub fn node_toml(dir: &std::path::Path, level: u8, size: &str, exports: &str) -> String {
    format!(
        "[node]\nnbd = \"127.0.0.1:0\"\napi = \"127.0.0.1:0\"\ncache_size = \"{size}\"\nlevel = {level}\n\
         data_dir = \"{}\"\nbusy_poll_us = 0\n{exports}",
        dir.display()
    )
}
