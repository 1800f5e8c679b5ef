//! Writing runtime changes into the broker's config file, so they survive a restart.
//!
//! Apache's broker answers an `updateBrokerConfig` by rewriting its config file whole: every
//! setting it has, sorted, comments gone, the previous content kept as `<file>.bak`. Comet
//! edits the file instead: the line of each changed key is replaced where it stands (every line
//! of a key given twice, and every physical line of a continued one), a key the file lacks is
//! appended, and every other line (comments, keys of the console, keys Comet does not know) is
//! kept as it was. The previous content is kept as `<file>.bak` too. The new content is written
//! to `<file>.tmp`, synced and renamed over the file, so a crash leaves either the old file or
//! the new one, never half of one.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use comet_config_file::properties::{logical_lines, split_key_value};

/// The first line of a file this module creates.
const NEW_FILE_HEADER: &str =
    "# Broker settings changed while running (updateBrokerConfig); read at start.\n";

/// `path` with `suffix` appended to its file name (`broker.conf` → `broker.conf.bak`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// `text` with each `(key, value)` of `changes` set: its lines replaced in place, or a
/// `key=value` line appended when the text has none.
pub fn edit_properties(text: &str, changes: &[(&str, String)]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    // What becomes of each physical line: kept, replaced by a `key=value` line, or dropped (the
    // continuation lines of a replaced key).
    let mut replaced: Vec<Option<Option<String>>> = vec![None; lines.len()];
    let mut found = vec![false; changes.len()];
    // Text the caller already parsed; a line it could not parse is kept untouched.
    for logical in logical_lines(text).unwrap_or_default() {
        let (key, _) = split_key_value(&logical.text);
        let Some(i) = changes.iter().position(|(k, _)| *k == key) else {
            continue;
        };
        found[i] = true;
        let (k, v) = &changes[i];
        for (offset, slot) in replaced
            .iter_mut()
            .enumerate()
            .take(logical.last + 1)
            .skip(logical.first)
        {
            *slot = Some((offset == logical.first).then(|| format!("{k}={v}")));
        }
    }
    let mut out = String::with_capacity(text.len() + 64);
    for (line, fate) in lines.iter().zip(replaced) {
        match fate {
            None => {
                let _ = writeln!(out, "{line}");
            }
            Some(Some(new)) => {
                let _ = writeln!(out, "{new}");
            }
            Some(None) => {}
        }
    }
    for ((key, value), _) in changes.iter().zip(found).filter(|(_, found)| !found) {
        let _ = writeln!(out, "{key}={value}");
    }
    out
}

/// Sets `changes` in the properties file at `path` (see the module docs), creating the file
/// and its directory when missing.
pub fn write_changes(path: &Path, changes: &[(&str, String)]) -> std::io::Result<()> {
    let previous = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let base = previous.as_deref().unwrap_or(NEW_FILE_HEADER);
    let text = edit_properties(base, changes);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    if let Some(previous) = &previous {
        std::fs::write(sibling(path, ".bak"), previous)?;
    }
    let tmp = sibling(path, ".tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        if let Ok(meta) = std::fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        // Makes the rename itself durable; a file system that cannot sync a directory still
        // has the new content in place.
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(key: &'static str, value: &str) -> (&'static str, String) {
        (key, value.to_owned())
    }

    #[test]
    fn lines_are_replaced_where_they_stand_and_the_rest_is_kept() {
        let text = "# operator's notes\nbrokerName=b1\nflushIntervalCommitLog = 500\n\
                    consolePort=8080\n\n! a comment\ndeleteWhen 04\n";
        let edited = edit_properties(
            text,
            &[
                change("flushIntervalCommitLog", "900"),
                change("deleteWhen", "01;02"),
                change("fileReservedTime", "48"),
            ],
        );
        assert_eq!(
            edited,
            "# operator's notes\nbrokerName=b1\nflushIntervalCommitLog=900\nconsolePort=8080\n\n\
             ! a comment\ndeleteWhen=01;02\nfileReservedTime=48\n"
        );
    }

    #[test]
    fn continued_and_repeated_keys_are_replaced_whole() {
        let text = "messageDelayLevel=1s \\\n   5s 10s\nbrokerName=b1\nmaxMessageSize=1\n\
                    maxMessageSize=2\n";
        let edited = edit_properties(
            text,
            &[
                change("messageDelayLevel", "1s"),
                change("maxMessageSize", "1024"),
            ],
        );
        assert_eq!(
            edited,
            "messageDelayLevel=1s\nbrokerName=b1\nmaxMessageSize=1024\nmaxMessageSize=1024\n"
        );
        let parsed = crate::config::parse_pairs(&edited).expect("parses");
        assert_eq!(parsed.len(), 4);
    }

    #[test]
    fn a_missing_file_is_created_and_an_existing_one_backed_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config").join("broker.properties");
        write_changes(&path, &[change("flushIntervalCommitLog", "900")]).expect("created");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(
            text,
            format!("{NEW_FILE_HEADER}flushIntervalCommitLog=900\n")
        );
        assert!(!sibling(&path, ".bak").exists(), "nothing to back up");

        write_changes(&path, &[change("flushIntervalCommitLog", "700")]).expect("edited");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(
            text,
            format!("{NEW_FILE_HEADER}flushIntervalCommitLog=700\n")
        );
        let backup = std::fs::read_to_string(sibling(&path, ".bak")).expect("backup");
        assert!(backup.contains("flushIntervalCommitLog=900"), "{backup}");
        assert!(!sibling(&path, ".tmp").exists());
    }
}
