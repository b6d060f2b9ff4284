//! The link check of the README and the book: every relative link must lead to a file of
//! the repository and, with `#anchor`, to a heading of that file, with anchors made as
//! mdbook makes them (lower case, spaces as `-`, other punctuation dropped, a repeated
//! heading numbered `-1`, `-2`). Links with a scheme (`https:`) are not followed: CI has
//! no network. Markdown is read with `pulldown-cmark`, the parser mdbook itself uses.
//! Written here rather than taken from `mdbook-linkcheck`, which pins an older mdbook and
//! does not check the README.

use anyhow::{Context, Result};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    /// Markdown files read.
    pub files: usize,
    /// Relative links checked.
    pub links: usize,
    /// Those that lead nowhere.
    pub broken: Vec<Broken>,
}

/// A link that leads nowhere: the file it is in, where, the target and why.
#[derive(Debug)]
pub struct Broken {
    file: PathBuf,
    line: usize,
    target: String,
    why: &'static str,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: `{}`: {}",
            self.file.display(),
            self.line,
            self.target,
            self.why
        )
    }
}

/// One Markdown file read: its links (line, target) and its headings' anchors.
struct Page {
    links: Vec<(usize, String)>,
    anchors: HashSet<String>,
}

/// Checks `root`'s README.md and every `.md` under `root/docs` (but the built book).
pub fn check(root: &Path) -> Result<Report> {
    let mut files = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut files)?;
    let mut pages = BTreeMap::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        pages.insert(normal(file), read(&text));
    }
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    for (file, page) in &pages {
        for (line, target) in &page.links {
            if target.contains(':') && !target.starts_with('#') {
                continue; // https:, mailto:: not followed
            }
            report.links += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                normal(&file.parent().unwrap_or(Path::new(".")).join(path))
            };
            let broken = |why| Broken {
                file: file.clone(),
                line: *line,
                target: target.clone(),
                why,
            };
            if !dest.starts_with(normal(root)) {
                report.broken.push(broken("leads out of the repository"));
            } else if !dest.exists() {
                report.broken.push(broken("no such file"));
            } else if let Some(anchor) = anchor {
                match pages.get(&dest) {
                    Some(p) if p.anchors.contains(anchor) => {}
                    Some(_) => report.broken.push(broken("no heading has this anchor")),
                    None => report
                        .broken
                        .push(broken("an anchor into a file that is not Markdown")),
                }
            }
        }
    }
    Ok(report)
}

/// Every `.md` file under `dir`, but `dir/book` (mdbook's output).
fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "book") {
                markdown_under(&path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// A path with `.` and `..` taken out, made absolute against the working directory.
fn normal(path: &Path) -> PathBuf {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

fn read(text: &str) -> Page {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut links = Vec::new();
    let mut anchors = HashSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => {
                links.push((line_of(range.start), dest_url.to_string()));
            }
            Event::Start(Tag::Heading { .. }) => {
                heading = Some(String::new());
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let id = anchor_of(&h);
                    let n = seen.entry(id.clone()).or_insert(0);
                    anchors.insert(if *n == 0 { id } else { format!("{id}-{n}") });
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    Page { links, anchors }
}

/// A heading's anchor as mdbook makes it.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_mdbooks() {
        assert_eq!(
            anchor_of("The papers' experiments"),
            "the-papers-experiments"
        );
        assert_eq!(anchor_of("`[node]` table"), "node-table");
        let page = read("# A b\n\n## A b\n\n[x](other.md#c)\n");
        assert!(page.anchors.contains("a-b") && page.anchors.contains("a-b-1"));
        assert_eq!(page.links, vec![(5, "other.md#c".to_string())]);
    }

    #[test]
    fn a_broken_link_names_file_line_and_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        std::fs::write(
            dir.path().join("README.md"),
            "# Top\n\n[book](docs/a.md#there) [gone](docs/b.md) [up](../x.md) [web](https://x.y)\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("docs/a.md"),
            "# A\n\n[back](../README.md#top) [no](#nowhere)\n",
        )
        .unwrap();
        let report = check(dir.path()).unwrap();
        assert_eq!(report.files, 2);
        assert_eq!(report.links, 5);
        let text: Vec<String> = report.broken.iter().map(|b| b.to_string()).collect();
        assert_eq!(text.len(), 4, "{text:?}");
        assert!(text[0].ends_with("README.md:3: `docs/a.md#there`: no heading has this anchor"));
        assert!(text[1].ends_with("README.md:3: `docs/b.md`: no such file"));
        assert!(text[2].ends_with("`../x.md`: leads out of the repository"));
        assert!(text[3].ends_with("a.md:3: `#nowhere`: no heading has this anchor"));
    }

    #[test]
    fn the_readme_and_the_book_have_no_broken_link() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let report = check(Path::new(root)).unwrap();
        let broken: Vec<String> = report.broken.iter().map(|b| b.to_string()).collect();
        assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
        assert!(report.files > 5 && report.links > 10, "{report:?}");
    }
}
