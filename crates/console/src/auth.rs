//! Accounts, sessions and the request guard.
//!
//! Two accounts exist: `admin` (read-write) and, when a read-only password is configured,
//! `viewer`. There is no default password: the admin password is either configured or generated
//! at first start (printed once, only its argon2 hash kept in `<data dir>/users.json`).
//!
//! A login creates a session with a random id, sent as an HttpOnly, SameSite=Strict cookie, and a
//! random CSRF token the page reads from `/api/session`. Every request but the login page and its
//! assets needs a live session (the API answers 401, pages redirect to `/login`); every write
//! (POST, PUT, DELETE) must also carry the session's token in the `x-csrf-token` header (403
//! otherwise), and the read-only role may not write at all (403). A session ends after
//! `consoleSessionTimeoutSecs` without a request (the status poll and the periodic refreshes of
//! an open page do not count), or at logout. After five failed logins in a
//! row an account refuses every login for a minute (429), which bounds password guessing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::http::{HeaderMap, header};
use base64::Engine;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::config::ConsoleConfig;
use crate::error::ConsoleError;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "comet_console_session";
/// Header a write must carry the session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The read-write account.
pub const ADMIN_USER: &str = "admin";
/// The read-only account.
pub const VIEWER_USER: &str = "viewer";
/// Most sessions kept at once; past it the least recently used one is dropped.
pub const MAX_SESSIONS: usize = 1024;
/// Failed logins in a row after which an account refuses every login for [`LOGIN_LOCKOUT`].
pub const MAX_FAILED_LOGINS: u32 = 5;
/// How long an account refuses logins after [`MAX_FAILED_LOGINS`] failures.
pub const LOGIN_LOCKOUT: Duration = Duration::from_secs(60);

/// What an account may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// Reads and writes.
    Admin,
    /// Reads only.
    Viewer,
}

/// The accounts' password hashes (PHC strings).
pub struct Accounts {
    admin: String,
    viewer: Option<String>,
}

/// `users.json`: the generated admin password's hash.
#[derive(Serialize, Deserialize)]
struct UsersFile {
    admin: String,
}

/// `n` random bytes from the operating system, URL-safe base64.
pub fn random_token(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn hash_password(password: &str) -> Result<String, ConsoleError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| ConsoleError::Accounts {
            path: String::new(),
            reason: format!("hashing a password: {e}"),
        })
}

impl Accounts {
    /// The accounts of `config`. Without a configured admin password, the hash in
    /// `<data dir>/users.json` is used; when that file does not exist either, a password is
    /// generated, its hash written there, and the password returned so the caller can show it
    /// once.
    pub fn load_or_create(
        config: &ConsoleConfig,
    ) -> Result<(Accounts, Option<String>), ConsoleError> {
        let viewer = config
            .read_only_password
            .as_deref()
            .map(hash_password)
            .transpose()?;
        if let Some(password) = &config.password {
            let admin = hash_password(password)?;
            return Ok((Accounts { admin, viewer }, None));
        }
        let path = config.data_dir.join("users.json");
        let fail = |reason: String| ConsoleError::Accounts {
            path: path.display().to_string(),
            reason,
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                let file: UsersFile =
                    serde_json::from_slice(&bytes).map_err(|e| fail(e.to_string()))?;
                PasswordHash::new(&file.admin).map_err(|e| fail(e.to_string()))?;
                Ok((
                    Accounts {
                        admin: file.admin,
                        viewer,
                    },
                    None,
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let password = random_token(18);
                let admin = hash_password(&password)?;
                write_users_file(
                    &path,
                    &UsersFile {
                        admin: admin.clone(),
                    },
                )
                .map_err(|e| fail(e.to_string()))?;
                Ok((Accounts { admin, viewer }, Some(password)))
            }
            Err(e) => Err(fail(e.to_string())),
        }
    }

    /// The role of `user` when `password` is theirs. Slow on purpose (argon2): call it off the
    /// async workers.
    pub fn verify(&self, user: &str, password: &str) -> Option<Role> {
        let (hash, role) = match user {
            ADMIN_USER => (Some(&self.admin), Role::Admin),
            VIEWER_USER => (self.viewer.as_ref(), Role::Viewer),
            _ => (None, Role::Viewer),
        };
        let parsed = PasswordHash::new(hash?).ok()?;
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .ok()
            .map(|()| role)
    }
}

fn write_users_file(path: &Path, file: &UsersFile) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp: PathBuf = path.with_extension("tmp");
    let text = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(&mut options.open(&tmp)?, &text)?;
    std::fs::rename(&tmp, path)
}

/// A logged-in session.
#[derive(Debug, Clone)]
pub struct Session {
    /// The account.
    pub user: String,
    /// What it may do.
    pub role: Role,
    /// The token every write must carry.
    pub csrf: String,
    last_seen: Instant,
}

/// The live sessions, by id, and the failed logins of each account.
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
    timeout: Duration,
    /// Failures in a row and the time of the last one, per account.
    failures: Mutex<HashMap<&'static str, (u32, Instant)>>,
}

/// The account named `user`, as a static name, when it is one of the two.
fn account_name(user: &str) -> Option<&'static str> {
    match user {
        ADMIN_USER => Some(ADMIN_USER),
        VIEWER_USER => Some(VIEWER_USER),
        _ => None,
    }
}

impl Sessions {
    /// No session yet; sessions end after `timeout` without a request.
    pub fn new(timeout: Duration) -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            timeout,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `user` refuses logins now: [`MAX_FAILED_LOGINS`] failures in a row, the last one
    /// less than [`LOGIN_LOCKOUT`] ago.
    pub fn login_locked(&self, user: &str) -> bool {
        let Some(name) = account_name(user) else {
            return false;
        };
        self.failures
            .lock()
            .get(name)
            .is_some_and(|(n, last)| *n >= MAX_FAILED_LOGINS && last.elapsed() < LOGIN_LOCKOUT)
    }

    /// Records a failed login of `user`; a lockout that has run out starts the count again.
    pub fn login_failed(&self, user: &str) {
        let Some(name) = account_name(user) else {
            return;
        };
        let mut failures = self.failures.lock();
        let entry = failures.entry(name).or_insert((0, Instant::now()));
        if entry.1.elapsed() >= LOGIN_LOCKOUT {
            entry.0 = 0;
        }
        entry.0 += 1;
        entry.1 = Instant::now();
    }

    /// Clears the failed logins of `user`.
    pub fn login_succeeded(&self, user: &str) {
        if let Some(name) = account_name(user) {
            self.failures.lock().remove(name);
        }
    }

    /// Starts a session for `user`; returns its id and the session.
    pub fn create(&self, user: &str, role: Role) -> (String, Session) {
        let id = random_token(32);
        let session = Session {
            user: user.to_owned(),
            role,
            csrf: random_token(32),
            last_seen: Instant::now(),
        };
        let mut map = self.map.lock();
        let timeout = self.timeout;
        map.retain(|_, s| s.last_seen.elapsed() < timeout);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(id.clone(), session.clone());
        (id, session)
    }

    /// The live session `id`, its idle time restarted; an expired one is removed.
    pub fn touch(&self, id: &str) -> Option<Session> {
        self.find(id, true)
    }

    /// The live session `id`, its idle time left running (a request the page makes on its own,
    /// not one of the user's); an expired one is removed.
    pub fn peek(&self, id: &str) -> Option<Session> {
        self.find(id, false)
    }

    fn find(&self, id: &str, restart: bool) -> Option<Session> {
        let mut map = self.map.lock();
        let session = map.get_mut(id)?;
        if session.last_seen.elapsed() >= self.timeout {
            map.remove(id);
            return None;
        }
        if restart {
            session.last_seen = Instant::now();
        }
        Some(session.clone())
    }

    /// Ends the session `id`.
    pub fn remove(&self, id: &str) {
        self.map.lock().remove(id);
    }
}

/// The session id in the request's cookies.
pub fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// The `Set-Cookie` value of a session; `max_age` 0 deletes the cookie.
pub fn session_cookie(id: &str, max_age: u64) -> String {
    format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}")
}
