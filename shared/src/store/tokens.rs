//! API tokens: created with a role (the secret is returned once), looked up by the SHA-256 of the
//! secret a caller presents, listed and revoked.
//!
//! Secrets are 32 random bytes, so one unsalted SHA-256 is enough to make a stolen table useless
//! and lets a presented token be found by an index instead of a scan.

use jiff::Timestamp;
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Context, Store, StoreError};
use crate::config::is_valid_name;
use crate::model::{Identity, Role};

/// The prefix of every secret, so a leaked one is recognisable (secret scanners, logs).
pub const SECRET_PREFIX: &str = "chime_";

/// A token as listed (never its secret).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    /// Its name: the `submit_user` of tasks it submits, the actor in the audit trail.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The OS users its tasks may ask for (`*`: any).
    pub execute_users: Vec<String>,
    /// Who created it.
    pub created_by: String,
    /// When.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
}

/// A token just created, with the secret that is shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    /// The token.
    #[serde(flatten)]
    pub token: TokenView,
    /// `Authorization: Bearer <secret>`; not stored, not shown again.
    pub secret: String,
}

fn sha256(secret: &str) -> Vec<u8> {
    digest(&SHA256, secret.as_bytes()).as_ref().to_vec()
}

fn new_secret() -> Result<String, StoreError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| StoreError::Invalid("the system's random source failed".into()))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{SECRET_PREFIX}{hex}"))
}

/// Names that are not tokens a user may create: `local` is the caller of an API without tokens,
/// `bootstrap` the row of `CHIME_API_TOKEN`.
pub const RESERVED_NAMES: [&str; 2] = ["local", BOOTSTRAP_NAME];
/// The name of `CHIME_API_TOKEN`'s row.
pub const BOOTSTRAP_NAME: &str = "bootstrap";

/// The least entropy a `CHIME_API_TOKEN` must carry, in bits: as much as `openssl rand -hex 32`.
pub const MIN_SECRET_BITS: f64 = 256.0;

/// Refuses a bootstrap secret that a guess could find: fewer than [`MIN_SECRET_BITS`] bits by the
/// most generous reading of its characters (4 bits each if all are hex digits, 6 if all are
/// base64's, 6.5 otherwise), or one that repeats a handful of characters.
pub fn check_secret_strength(secret: &str) -> Result<(), StoreError> {
    let per_char: f64 = if secret.chars().all(|c| c.is_ascii_hexdigit()) {
        4.0
    } else if secret
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_'))
    {
        6.0
    } else {
        6.5
    };
    let distinct = secret
        .chars()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let bits = per_char * secret.chars().count() as f64;
    if bits < MIN_SECRET_BITS || distinct < 10 {
        return Err(StoreError::Invalid(format!(
            "CHIME_API_TOKEN is too weak to be the admin token (about {bits:.0} bits; it needs \
             {MIN_SECRET_BITS:.0}): make one with `openssl rand -hex 32`"
        )));
    }
    Ok(())
}

/// Records `CHIME_API_TOKEN` as the live admin token named `bootstrap` (replacing the secret of a
/// previous one), so every process of the installation — workers checking AMQP submissions
/// included — knows authentication is on, whether or not it was given the token itself. It stays
/// live until `chime token revoke bootstrap`; a secret that was revoked is refused, so revoking
/// it cannot be undone by restarting with it.
pub async fn ensure_bootstrap(store: &Store, secret: &str) -> Result<(), StoreError> {
    check_secret_strength(secret)?;
    let revoked: Option<(String, jiff_sqlx::Timestamp)> = sqlx::query_as(
        "SELECT name, revoked_at FROM api_tokens
         WHERE secret_sha256 = $1 AND revoked_at IS NOT NULL",
    )
    .bind(sha256(secret))
    .fetch_optional(store.pool())
    .await
    .context("checking the bootstrap token")?;
    if let Some((name, at)) = revoked {
        return Err(StoreError::Invalid(format!(
            "CHIME_API_TOKEN is the secret of token {name:?}, which was revoked at {} and stays \
             so: start with a new one (`openssl rand -hex 32`)",
            at.to_jiff()
        )));
    }
    sqlx::query(
        "INSERT INTO api_tokens (name, role, execute_users, secret_sha256, created_by)
         VALUES ($1, 'admin', '{*}', $2, 'CHIME_API_TOKEN')
         ON CONFLICT (name) WHERE revoked_at IS NULL
         DO UPDATE SET secret_sha256 = excluded.secret_sha256, role = 'admin',
                       execute_users = '{*}'",
    )
    .bind(BOOTSTRAP_NAME)
    .bind(sha256(secret))
    .execute(store.pool())
    .await
    .context("recording the bootstrap token")?;
    Ok(())
}

/// Creates a token named `name`; its secret is in the answer and nowhere else.
pub async fn create(
    store: &Store,
    name: &str,
    role: Role,
    execute_users: &[String],
    created_by: &str,
) -> Result<CreatedToken, StoreError> {
    if !is_valid_name(name) {
        return Err(StoreError::Invalid(format!(
            "invalid token name {name:?}: use 1-100 letters, digits, '-', '_' or '.'"
        )));
    }
    if RESERVED_NAMES.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(StoreError::Invalid(format!(
            "{name:?} is a reserved name; choose another"
        )));
    }
    if let Some(bad) = execute_users
        .iter()
        .find(|u| u.as_str() != crate::model::ANY_USER && !is_valid_name(u))
    {
        return Err(StoreError::Invalid(format!(
            "invalid execute user {bad:?}: a user name, or * for any"
        )));
    }
    let secret = new_secret()?;
    let created_at: Result<Timestamp, sqlx::Error> = sqlx::query_scalar(
        "INSERT INTO api_tokens (name, role, execute_users, secret_sha256, created_by)
         VALUES ($1, $2, $3, $4, $5) RETURNING created_at",
    )
    .bind(name)
    .bind(role.as_str())
    .bind(execute_users)
    .bind(sha256(&secret))
    .bind(created_by)
    .fetch_one(store.pool())
    .await
    .map(|t: jiff_sqlx::Timestamp| t.to_jiff());
    let created_at = match created_at {
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {
            return Err(StoreError::Conflict(format!(
                "a token named {name:?} exists: revoke it first, or choose another name"
            )));
        }
        other => other.context("creating a token")?,
    };
    Ok(CreatedToken {
        token: TokenView {
            name: name.to_string(),
            role,
            execute_users: execute_users.to_vec(),
            created_by: created_by.to_string(),
            created_at,
        },
        secret,
    })
}

/// The live tokens, by name.
pub async fn list(store: &Store) -> Result<Vec<TokenView>, StoreError> {
    let rows: Vec<(String, String, Vec<String>, String, jiff_sqlx::Timestamp)> = sqlx::query_as(
        "SELECT name, role, execute_users, created_by, created_at FROM api_tokens
         WHERE revoked_at IS NULL ORDER BY name",
    )
    .fetch_all(store.pool())
    .await
    .context("listing tokens")?;
    Ok(rows
        .into_iter()
        .map(
            |(name, role, execute_users, created_by, created_at)| TokenView {
                name,
                // The column's CHECK holds the three names.
                role: role.parse().unwrap_or(Role::Read),
                execute_users,
                created_by,
                created_at: created_at.to_jiff(),
            },
        )
        .collect())
}

/// Revokes the live token named `name`; it stops working at once.
pub async fn revoke(store: &Store, name: &str) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE api_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL",
    )
    .bind(name)
    .execute(store.pool())
    .await
    .context("revoking a token")?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("token {name:?}")));
    }
    Ok(())
}

/// The identity behind a presented secret, if it is a live token's.
pub async fn authenticate(store: &Store, secret: &str) -> Result<Option<Identity>, StoreError> {
    let row: Option<(String, String, Vec<String>)> = sqlx::query_as(
        "SELECT name, role, execute_users FROM api_tokens
         WHERE secret_sha256 = $1 AND revoked_at IS NULL",
    )
    .bind(sha256(secret))
    .fetch_optional(store.pool())
    .await
    .context("looking up a token")?;
    Ok(row.and_then(|(name, role, execute_users)| {
        Some(Identity {
            name,
            role: role.parse().ok()?,
            execute_users,
        })
    }))
}

/// Whether any live token exists (then every API route but the health checks needs one).
pub async fn any_live(store: &Store) -> Result<bool, StoreError> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM api_tokens WHERE revoked_at IS NULL)")
        .fetch_one(store.pool())
        .await
        .context("checking for tokens")
}
