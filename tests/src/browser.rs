//! A headless Chromium driven over the DevTools protocol, for tests that check what a user sees
//! in the dashboard. Chromium is started with `--remote-debugging-pipe`: commands go in on its
//! file descriptor 3 and answers come out on 4, as NUL-separated JSON, so no WebSocket client and
//! no port are needed. A page is checked by evaluating JavaScript in it.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, oneshot};

type Pending = Arc<std::sync::Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A running headless Chromium.
pub struct Browser {
    child: tokio::process::Child,
    commands: Mutex<tokio::fs::File>,
    pending: Pending,
    next_id: AtomicU64,
    _profile: PathBuf,
}

/// The Chromium binary, if installed (Debian's `chromium`).
pub fn chromium_binary() -> Option<PathBuf> {
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// A pipe whose ends are moved above the standard descriptors (so that placing them at 3 and 4
/// in the child cannot clobber one another), close-on-exec in this process.
fn high_pipe() -> Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    let mut high = [0; 2];
    for (i, fd) in fds.iter().enumerate() {
        // SAFETY: duplicating a descriptor this function owns.
        high[i] = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 10) };
        // SAFETY: closing the original, which nothing else holds.
        unsafe { libc::close(*fd) };
        if high[i] < 0 {
            return Err(std::io::Error::last_os_error()).context("fcntl");
        }
    }
    Ok((high[0], high[1]))
}

impl Browser {
    /// Starts Chromium headless with a fresh profile, its window `width`×`height`.
    pub async fn launch(width: u32, height: u32) -> Result<Self> {
        let binary = chromium_binary().ok_or_else(|| anyhow!("chromium is not installed"))?;
        let profile = crate::scratch_dir("chromium")?;
        let (to_browser_read, to_browser_write) = high_pipe()?;
        let (from_browser_read, from_browser_write) = high_pipe()?;
        let mut command = std::process::Command::new(binary);
        command
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-pipe",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.display()),
                "about:blank",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: dup2 is async-signal-safe; the descriptors are this process's own.
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(to_browser_read, 3) < 0 || libc::dup2(from_browser_write, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = tokio::process::Command::from(command)
            .kill_on_drop(true)
            .spawn()
            .context("starting chromium")?;
        // SAFETY: these descriptors are ours alone from here on.
        let (commands, answers) = unsafe {
            libc::close(to_browser_read);
            libc::close(from_browser_write);
            (
                OwnedFd::from_raw_fd(to_browser_write),
                OwnedFd::from_raw_fd(from_browser_read),
            )
        };
        let pending: Pending = Arc::default();
        tokio::spawn(read_answers(
            tokio::fs::File::from_std(std::fs::File::from(answers)),
            pending.clone(),
        ));
        Ok(Self {
            child,
            commands: Mutex::new(tokio::fs::File::from_std(std::fs::File::from(commands))),
            pending,
            next_id: AtomicU64::new(1),
            _profile: profile,
        })
    }

    /// Sends a DevTools command (to a page's session, or to the browser) and returns its result.
    pub async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .insert(id, tx);
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message)?;
        bytes.push(0);
        {
            let mut commands = self.commands.lock().await;
            commands.write_all(&bytes).await?;
            commands.flush().await?;
        }
        let answer = tokio::time::timeout(Duration::from_secs(60), rx)
            .await
            .with_context(|| format!("{method}: no answer from chromium"))?
            .context("chromium went away")?;
        if let Some(error) = answer.get("error") {
            bail!("{method}: {error}");
        }
        Ok(answer.get("result").cloned().unwrap_or(Value::Null))
    }

    /// Opens a tab at `url`.
    pub async fn open(&self, url: &str) -> Result<Page<'_>> {
        let target = self
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await?;
        let target_id = target["targetId"]
            .as_str()
            .ok_or_else(|| anyhow!("no target id"))?;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target_id, "flatten": true }),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow!("no session id"))?
            .to_string();
        let page = Page {
            browser: self,
            session,
        };
        page.call("Page.enable", json!({})).await?;
        page.call("Runtime.enable", json!({})).await?;
        page.goto(url).await?;
        Ok(page)
    }

    /// Stops Chromium.
    pub async fn close(mut self) {
        let _ = self.call(None, "Browser.close", json!({})).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        let _ = self.child.kill().await;
    }
}

async fn read_answers(answers: tokio::fs::File, pending: Pending) {
    let mut reader = BufReader::new(answers);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(0, &mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buffer.last() == Some(&0) {
            buffer.pop();
        }
        let Ok(message) = serde_json::from_slice::<Value>(&buffer) else {
            continue;
        };
        if let Some(id) = message.get("id").and_then(Value::as_u64)
            && let Ok(mut pending) = pending.lock()
            && let Some(reply) = pending.remove(&id)
        {
            let _ = reply.send(message);
        }
    }
}

/// One tab.
pub struct Page<'b> {
    browser: &'b Browser,
    session: String,
}

impl Page<'_> {
    async fn call(&self, method: &str, params: Value) -> Result<Value> {
        self.browser.call(Some(&self.session), method, params).await
    }

    /// Makes the tab's clock read in `zone` (an IANA name), as a browser set to that zone would;
    /// takes effect for what the page renders from then on.
    pub async fn set_time_zone(&self, zone: &str) -> Result<()> {
        self.call(
            "Emulation.setTimezoneOverride",
            json!({ "timezoneId": zone }),
        )
        .await?;
        Ok(())
    }

    /// Loads `url` and waits for its document.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.call("Page.navigate", json!({ "url": url })).await?;
        self.wait_for("the page to load", "document.readyState === 'complete'")
            .await
    }

    /// Evaluates `expression` (awaiting a promise) and returns its value as JSON.
    pub async fn eval(&self, expression: &str) -> Result<Value> {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
            )
            .await?;
        if let Some(exception) = result.get("exceptionDetails") {
            bail!("{expression}: {exception}");
        }
        Ok(result["result"]["value"].clone())
    }

    /// The text of the page's `<main>`.
    pub async fn text(&self) -> Result<String> {
        Ok(self
            .eval("document.querySelector('main').innerText")
            .await?
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Waits (up to a generous deadline) until `condition` evaluates to true in the page.
    pub async fn wait_for(&self, what: &str, condition: &str) -> Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match self.eval(&format!("!!({condition})")).await {
                Ok(Value::Bool(true)) => return Ok(()),
                Ok(_) | Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(_) => {
                    let text = self
                        .eval("location.href + '\\n' + document.body.innerText")
                        .await
                        .unwrap_or_default();
                    let text = text.as_str().unwrap_or_default();
                    bail!("timed out waiting for {what}; the page shows:\n{text}");
                }
                Err(error) => return Err(error.context(format!("waiting for {what}"))),
            }
        }
    }

    /// Waits until the page's `<main>` shows `needle`.
    pub async fn wait_for_text(&self, needle: &str) -> Result<()> {
        let quoted = serde_json::to_string(needle)?;
        self.wait_for(
            &format!("the page to show {needle:?}"),
            &format!("document.querySelector('main').innerText.includes({quoted})"),
        )
        .await
    }

    /// Clicks the first element matching `selector` whose text contains `text` (any, if empty).
    pub async fn click(&self, selector: &str, text: &str) -> Result<()> {
        let selector = serde_json::to_string(selector)?;
        let text = serde_json::to_string(text)?;
        let clicked = self
            .eval(&format!(
                "(() => {{ const el = [...document.querySelectorAll({selector})]
                    .find(e => e.textContent.includes({text}));
                  if (!el) return false; el.click(); return true; }})()"
            ))
            .await?;
        if clicked != Value::Bool(true) {
            bail!("nothing to click: {selector} with {text}");
        }
        Ok(())
    }

    /// Saves a PNG of the whole page to `path`.
    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true }),
            )
            .await?;
        let data = shot["data"]
            .as_str()
            .ok_or_else(|| anyhow!("no screenshot data"))?;
        let png = base64::engine::general_purpose::STANDARD.decode(data)?;
        std::fs::write(path, png).with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }
}
