//! # comet-config-file
//!
//! Crash-safe JSON config files (`topics.json`, `consumerOffset.json`, `kvConfig.json`, ...), shared
//! by the broker (its metadata tables) and the name server (its KV config).
//!
//! A broker rewrites these files every few seconds; a crash in the middle of a write must never
//! leave it without a usable copy. RocketMQ's `MixAll.string2File` writes `<file>.tmp`, keeps the
//! previous version as `<file>.bak`, then replaces the file; at load, a missing or unreadable file
//! falls back to the `.bak`. This crate does the same and adds the fsyncs that make it hold across
//! power loss: the temporary file is synced before the rename, and the directory after it.
//!
//! The files are written the way fastjson's `PrettyFormat` writes them (tabs, one entry per line,
//! `"key":value` without a space, maps with integer keys kept on one line with the closing brace
//! on the next), so they diff cleanly against a Java broker's and Java tooling reads them.

#![forbid(unsafe_code)]

pub mod properties;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use serde::Serialize;
use thiserror::Error;

/// A config file could not be read, parsed or written. Every variant names the file.
#[derive(Debug, Error)]
pub enum ConfigFileError {
    /// An operating-system I/O call failed on `path`.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file's content is not the JSON document expected.
    #[error("JSON error in {path}: {reason}")]
    Json { path: PathBuf, reason: String },
    /// A value could not be rendered as fastjson text.
    #[error("protocol error: {0}")]
    Encode(#[from] comet_protocol::ProtocolError),
}

impl ConfigFileError {
    /// Wraps an [`std::io::Error`] with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ConfigFileError::Io {
            path: path.into(),
            source,
        }
    }

    /// A [`ConfigFileError::Json`] for content not yet tied to a path ([`ConfigFile::load`] fills
    /// the path in).
    pub fn json(reason: impl std::fmt::Display) -> Self {
        ConfigFileError::Json {
            path: PathBuf::new(),
            reason: reason.to_string(),
        }
    }
}

/// Suffix of the previous version of a config file.
pub const BAK_SUFFIX: &str = ".bak";
/// Suffix of the file being written.
pub const TMP_SUFFIX: &str = ".tmp";
/// Indentation of the pretty form (fastjson uses one tab per level).
const PRETTY_INDENT: char = '\t';

/// `path` with `suffix` appended to its file name (`topics.json` → `topics.json.bak`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The `.bak` path of a config file.
pub fn bak_path(path: &Path) -> PathBuf {
    with_suffix(path, BAK_SUFFIX)
}

fn sync_dir(dir: &Path) -> Result<(), ConfigFileError> {
    let handle = File::open(dir).map_err(|e| ConfigFileError::io(dir, e))?;
    handle.sync_all().map_err(|e| ConfigFileError::io(dir, e))
}

/// Replaces the file at `path` with `content` so that at every instant either the old or the new
/// content is on disk: write `<path>.tmp` and fsync it, copy the current file to `<path>.bak`,
/// rename the temporary file over `path`, fsync the directory.
pub fn persist_atomically(path: &Path, content: &str) -> Result<(), ConfigFileError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|e| ConfigFileError::io(&dir, e))?;
    let tmp = with_suffix(path, TMP_SUFFIX);
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| ConfigFileError::io(&tmp, e))?;
        file.write_all(content.as_bytes())
            .map_err(|e| ConfigFileError::io(&tmp, e))?;
        file.sync_all().map_err(|e| ConfigFileError::io(&tmp, e))?;
    }
    let bak = bak_path(path);
    match fs::metadata(path) {
        // An empty main file is the debris of an earlier failure; keep the older `.bak` instead.
        Ok(meta) if meta.len() > 0 => {
            fs::copy(path, &bak).map_err(|e| ConfigFileError::io(&bak, e))?;
            File::open(&bak)
                .and_then(|f| f.sync_all())
                .map_err(|e| ConfigFileError::io(&bak, e))?;
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ConfigFileError::io(path, e)),
    }
    fs::rename(&tmp, path).map_err(|e| ConfigFileError::io(path, e))?;
    sync_dir(&dir)
}

/// Reads a file; `None` if it is missing or holds only whitespace.
fn read_non_empty(path: &Path) -> Result<Option<String>, ConfigFileError> {
    match fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(None),
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(ConfigFileError::Json {
            path: path.to_path_buf(),
            reason: "file is not UTF-8".into(),
        }),
        Err(e) => Err(ConfigFileError::io(path, e)),
    }
}

/// The content of `path`, or of `<path>.bak` when `path` is missing or empty; `None` when
/// neither has content (first start).
pub fn load_with_backup(path: &Path) -> Result<Option<String>, ConfigFileError> {
    match read_non_empty(path) {
        Ok(Some(text)) => Ok(Some(text)),
        Ok(None) => read_non_empty(&bak_path(path)),
        Err(ConfigFileError::Json { .. }) => read_non_empty(&bak_path(path)),
        Err(e) => Err(e),
    }
}

/// Loads and parses `path`, falling back to `<path>.bak` when the main file is missing, empty or
/// rejected by `parse`. `None` when neither exists; an error when every copy present is bad (the
/// broker must not start with silently lost configuration).
pub fn load_parsed<T>(
    path: &Path,
    parse: impl Fn(&str) -> Result<T, ConfigFileError>,
) -> Result<Option<T>, ConfigFileError> {
    let main_err = match read_non_empty(path) {
        Ok(Some(text)) => match parse(&text) {
            Ok(value) => return Ok(Some(value)),
            Err(e) => Some(e),
        },
        Ok(None) => None,
        Err(e @ ConfigFileError::Json { .. }) => Some(e),
        Err(e) => return Err(e),
    };
    if let Some(e) = &main_err {
        tracing::warn!(path = %path.display(), error = %e, "config file unreadable, trying the .bak copy");
    }
    let bak = bak_path(path);
    match read_non_empty(&bak) {
        Ok(Some(text)) => match parse(&text) {
            Ok(value) => {
                tracing::warn!(path = %bak.display(), "loaded config from the .bak copy");
                Ok(Some(value))
            }
            Err(bak_err) => Err(main_err.unwrap_or(bak_err)),
        },
        Ok(None) => main_err.map_or(Ok(None), Err),
        Err(bak_err) => Err(main_err.unwrap_or(bak_err)),
    }
}

/// Re-indents compact fastjson text the way fastjson's `PrettyFormat` lays it out.
///
/// Objects with quoted keys (and arrays) get one entry per line, indented by tabs; an object whose
/// keys are bare (integer map keys such as `{0:250,1:248}`) stays on one line and only its closing
/// brace moves to the next line; empty `{}` / `[]` stay as they are. Strings are copied verbatim.
pub fn pretty_fastjson(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() + compact.len() / 2);
    let mut depth = 0usize;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(PRETTY_INDENT, depth));
    };
    while let Some(c) = chars.next() {
        match c {
            '"' => copy_string(&mut out, &mut chars),
            '{' | '[' => {
                out.push(c);
                let close = if c == '{' { '}' } else { ']' };
                match chars.peek() {
                    Some(&next) if next == close => {
                        out.push(close);
                        chars.next();
                    }
                    Some(&next) if c == '{' && next != '"' => {
                        // Bare keys: copy the whole object compactly, then the brace on its own line.
                        copy_inline_object(&mut out, &mut chars);
                        newline(&mut out, depth);
                        out.push('}');
                    }
                    _ => {
                        depth += 1;
                        newline(&mut out, depth);
                    }
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Copies the rest of a string literal (the opening quote was consumed) including the closing quote.
fn copy_string(out: &mut String, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    out.push('"');
    let mut escaped = false;
    for c in chars.by_ref() {
        out.push(c);
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            return;
        }
    }
}

/// Copies the body of an object (after its `{`) up to, not including, its matching `}`, which is
/// consumed.
fn copy_inline_object(out: &mut String, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    let mut nesting = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '"' => copy_string(out, chars),
            '{' | '[' => {
                nesting += 1;
                out.push(c);
            }
            '}' | ']' if nesting == 0 => return,
            '}' | ']' => {
                nesting -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

/// Serializes `value` as fastjson does (sorted keys, bare integer keys) in its pretty layout.
pub fn to_fastjson_pretty<T: Serialize + ?Sized>(value: &T) -> Result<String, ConfigFileError> {
    let compact = comet_protocol::body::to_fastjson(value)?;
    Ok(pretty_fastjson(&compact))
}

/// A document kept in a config file.
pub trait ConfigData: Sized {
    /// The file content for this value.
    fn encode(&self) -> Result<String, ConfigFileError>;
    /// Parses file content (fastjson or standard JSON).
    fn decode(text: &str) -> Result<Self, ConfigFileError>;
}

/// A config file holding a `T`: load with `.bak` fallback, persist atomically. Persists through
/// one `ConfigFile` are serialised so two threads never interleave on the temporary file.
pub struct ConfigFile<T> {
    path: PathBuf,
    persist_lock: Mutex<()>,
    _marker: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for ConfigFile<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigFile")
            .field("path", &self.path)
            .finish()
    }
}

impl<T: ConfigData> ConfigFile<T> {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ConfigFile {
            path: path.into(),
            persist_lock: Mutex::new(()),
            _marker: PhantomData,
        }
    }

    /// Path of the main file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the value (see [`load_parsed`]); `None` on first start.
    pub fn load(&self) -> Result<Option<T>, ConfigFileError> {
        let path = self.path.clone();
        load_parsed(&self.path, |text| {
            T::decode(text).map_err(|e| match e {
                ConfigFileError::Json { reason, .. } => ConfigFileError::Json {
                    path: path.clone(),
                    reason,
                },
                other => other,
            })
        })
    }

    /// Writes `value` atomically (see [`persist_atomically`]).
    pub fn persist(&self, value: &T) -> Result<(), ConfigFileError> {
        self.persist_snapshot(|| value.encode())
    }

    /// Takes the content with `snapshot` and writes it atomically, both under the file's persist
    /// lock. Tables that change while they are persisted use this: with the snapshot taken
    /// before the lock, two concurrent persists could write their snapshots in the opposite
    /// order and leave the older one on disk (a change lost until the next persist).
    pub fn persist_snapshot(
        &self,
        snapshot: impl FnOnce() -> Result<String, ConfigFileError>,
    ) -> Result<(), ConfigFileError> {
        let _guard = self.persist_lock.lock();
        let text = snapshot()?;
        persist_atomically(&self.path, &text)
    }
}

/// Whether a config table changed since its file was last written, so the broker's periodic
/// persist can skip an unchanged file (a write costs three fsyncs).
///
/// The mark is cleared before the write takes its snapshot: a change racing with the write marks
/// the table again and is written next time. A failed write leaves it marked.
#[derive(Debug, Default)]
pub struct DirtyFlag(AtomicBool);

impl DirtyFlag {
    /// Records that the table changed.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Runs `write` if the table changed since the last write; true if it wrote.
    pub fn write_if_marked<E>(&self, write: impl FnOnce() -> Result<(), E>) -> Result<bool, E> {
        if !self.0.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        write().inspect_err(|_| self.mark()).map(|()| true)
    }

    /// Runs `write` unconditionally (shutdown).
    pub fn write<E>(&self, write: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
        self.0.store(false, Ordering::Release);
        write().inspect_err(|_| self.mark())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dirty_flag_writes_when_marked_and_stays_marked_after_a_failed_write() {
        let flag = DirtyFlag::default();
        let mut writes = 0;
        assert!(
            !flag
                .write_if_marked(|| {
                    writes += 1;
                    Ok::<(), ConfigFileError>(())
                })
                .unwrap()
        );
        flag.mark();
        let failed = flag.write_if_marked(|| Err(ConfigFileError::json("disk full")));
        assert!(failed.is_err());
        assert!(
            flag.write_if_marked(|| {
                writes += 1;
                Ok::<(), ConfigFileError>(())
            })
            .unwrap()
        );
        assert!(
            !flag
                .write_if_marked(|| {
                    writes += 1;
                    Ok::<(), ConfigFileError>(())
                })
                .unwrap()
        );
        assert!(
            flag.write(|| Err(ConfigFileError::json("disk full")))
                .is_err()
        );
        assert!(
            flag.write_if_marked(|| {
                writes += 1;
                Ok::<(), ConfigFileError>(())
            })
            .unwrap()
        );
        assert_eq!(writes, 2);
    }

    /// A document that is its own text.
    struct Text(String);

    impl ConfigData for Text {
        fn encode(&self) -> Result<String, ConfigFileError> {
            Ok(self.0.clone())
        }
        fn decode(text: &str) -> Result<Self, ConfigFileError> {
            Ok(Text(text.to_owned()))
        }
    }

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
    }

    #[test]
    fn pretty_layout_matches_fastjson() {
        let compact = r#"{"offsetTable":{"T@g":{0:250,1:248},"%RETRY%g@g":{0:0}}}"#;
        let expected = "{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:250,1:248\n\t\t},\n\t\t\"%RETRY%g@g\":{0:0\n\t\t}\n\t}\n}";
        assert_eq!(pretty_fastjson(compact), expected);
        assert_eq!(
            pretty_fastjson(r#"{"a":{},"b":[]}"#),
            "{\n\t\"a\":{},\n\t\"b\":[]\n}"
        );
        assert_eq!(
            pretty_fastjson(r#"{"s":"x{,}\"[:","l":[1,2]}"#),
            "{\n\t\"s\":\"x{,}\\\"[:\",\n\t\"l\":[\n\t\t1,\n\t\t2\n\t]\n}"
        );
    }

    #[test]
    fn a_snapshot_is_taken_under_the_persist_lock() -> Result<(), ConfigFileError> {
        let dir = tmp();
        let file: ConfigFile<Text> = ConfigFile::new(dir.path().join("delayOffset.json"));
        let mut held = None;
        file.persist_snapshot(|| {
            // Another persist cannot start between this snapshot and its write.
            held = Some(file.persist_lock.try_lock().is_none());
            Ok("{}".to_owned())
        })?;
        assert_eq!(held, Some(true));
        assert_eq!(
            fs::read_to_string(dir.path().join("delayOffset.json"))
                .ok()
                .as_deref(),
            Some("{}")
        );
        Ok(())
    }

    #[test]
    fn persist_keeps_previous_version_as_bak() -> Result<(), ConfigFileError> {
        let dir = tmp();
        let path = dir.path().join("config").join("x.json");
        persist_atomically(&path, "one")?;
        assert!(
            !bak_path(&path).exists(),
            "nothing to back up on the first write"
        );
        persist_atomically(&path, "two")?;
        assert_eq!(fs::read_to_string(&path).ok().as_deref(), Some("two"));
        assert_eq!(
            fs::read_to_string(bak_path(&path)).ok().as_deref(),
            Some("one")
        );
        assert!(!with_suffix(&path, TMP_SUFFIX).exists());
        assert_eq!(load_with_backup(&path)?.as_deref(), Some("two"));
        Ok(())
    }

    #[test]
    fn load_falls_back_to_bak() -> Result<(), ConfigFileError> {
        let dir = tmp();
        let path = dir.path().join("y.json");
        assert_eq!(load_with_backup(&path)?, None);
        fs::write(bak_path(&path), "backup").map_err(|e| ConfigFileError::io(&path, e))?;
        assert_eq!(
            load_with_backup(&path)?.as_deref(),
            Some("backup"),
            "main missing"
        );
        fs::write(&path, " \n").map_err(|e| ConfigFileError::io(&path, e))?;
        assert_eq!(
            load_with_backup(&path)?.as_deref(),
            Some("backup"),
            "main empty"
        );
        fs::write(&path, "garbage").map_err(|e| ConfigFileError::io(&path, e))?;
        let parse = |t: &str| -> Result<String, ConfigFileError> {
            if t == "garbage" {
                Err(ConfigFileError::Json {
                    path: PathBuf::new(),
                    reason: "bad".into(),
                })
            } else {
                Ok(t.to_owned())
            }
        };
        assert_eq!(
            load_parsed(&path, parse)?.as_deref(),
            Some("backup"),
            "main corrupt"
        );
        fs::write(bak_path(&path), "garbage").map_err(|e| ConfigFileError::io(&path, e))?;
        assert!(
            load_parsed(&path, parse).is_err(),
            "both corrupt is an error"
        );
        Ok(())
    }
}
