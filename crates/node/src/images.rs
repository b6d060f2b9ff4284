//! The image files a node serves from: opened, or created sparse when missing and never
//! used before, and listed in the data directory ([`IMAGES_FILE`]) with their sizes, so
//! that a missing image is never silently recreated after its first start and an image
//! truncated while the node was stopped is refused.

use std::path::Path;

/// The data directory's list of image files this node has used, one a line as `PATH`, a
/// tab and its size in bytes (a line of a bare path, from older versions, gets its size
/// at the next start): a missing image is never silently recreated after its first start,
/// and an image that shrank while the node was stopped is refused.
pub const IMAGES_FILE: &str = "images.list";

/// The entries of the images file (`path`, recorded size); none if it does not exist.
fn read_images(images: &Path) -> Vec<(String, Option<u64>)> {
    let Ok(text) = std::fs::read_to_string(images) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| match l.rsplit_once('\t') {
            Some((p, n)) if n.parse::<u64>().is_ok() => (p.to_string(), n.parse().ok()),
            _ => (l.to_string(), None),
        })
        .collect()
}

/// Rewrites the images file with `entries` (temporary file, sync, rename).
fn write_images(images: &Path, entries: &[(String, Option<u64>)]) -> std::io::Result<()> {
    use std::io::Write;
    let mut text = String::new();
    for (p, n) in entries {
        match n {
            Some(n) => text.push_str(&format!("{p}\t{n}\n")),
            None => text.push_str(&format!("{p}\n")),
        }
    }
    let tmp = images.with_extension("list.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, images)
}

/// Opens `path`, creating it sparse with `size` bytes if it is missing and no earlier start
/// used it (listed in `images`), or if `recreate` says so; records it and its size in
/// `images`. An image smaller than the size recorded at an earlier start was truncated
/// while the node was stopped: that is an error naming the image and both sizes.
pub(crate) fn open_or_create(
    path: &Path,
    size: Option<u64>,
    images: &Path,
    recreate: bool,
) -> Result<cache::FileBackend, String> {
    let name = path.display().to_string();
    let mut entries = read_images(images);
    let listed = entries.iter().position(|(p, _)| *p == name);
    if !path.exists() && listed.is_some() && !recreate {
        return Err(format!(
            "image {name} is missing, but an earlier start of this node used it (listed in \
             {}): it was deleted or moved. Restore it, or set `recreate_missing = true` on \
             the export to start over with an empty image",
            images.display()
        ));
    }
    let mut created = false;
    if !path.exists() {
        let size = size.ok_or_else(|| {
            format!(
                "{} does not exist and no `size` says how big to create it",
                path.display()
            )
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        f.set_len(size)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        tracing::info!(path = %path.display(), size, "created sparse file");
        created = true;
    }
    let b = cache::FileBackend::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let actual = cache::Backend::size(&b);
    if let Some(size) = size {
        if actual != size {
            tracing::warn!(path = %path.display(), configured = size, actual,
                "file exists with another size; using its actual size");
        }
    }
    let recorded = listed.and_then(|i| entries[i].1);
    if let Some(was) = recorded.filter(|&was| actual < was && !created) {
        return Err(format!(
            "image {name} is {actual} bytes, but it was {was} bytes when this node last used \
             it (recorded in {}): it was truncated while the node was stopped, and the data \
             past byte {actual} is gone. Restore it; or, to go on without that data, grow it \
             back (`truncate -s {was} {name}`) or remove its line from {}",
            images.display(),
            images.display()
        ));
    }
    if recorded != Some(actual) {
        if let Some(was) = recorded {
            tracing::warn!(path = %path.display(), was, now = actual, "image grew while the node was stopped");
        }
        match listed {
            Some(i) => entries[i].1 = Some(actual),
            None => entries.push((name.clone(), Some(actual))),
        }
        write_images(images, &entries).map_err(|e| format!("{}: {e}", images.display()))?;
    }
    Ok(b)
}
