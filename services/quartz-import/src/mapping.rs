//! What a Quartz job class becomes in chime: `--job-class CLASS=shell:COMMAND` (run by `sh -c`)
//! or `CLASS=http:URL` (the job data POSTed to it), given on the command line or a line each in
//! `--job-classes FILE`. A Java job class is code; chime runs commands and calls URLs, so the
//! operator says which one stands for each class.

use std::collections::BTreeMap;

/// What a class runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A command for `sh -c`.
    Shell(String),
    /// A URL the job data is POSTed to.
    Http(String),
}

/// A mapping that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {line:?}: {why}")]
pub struct BadMapping {
    /// Where it was given (`--job-class`, `FILE line 3`).
    pub origin: String,
    /// The text.
    pub line: String,
    /// What is wrong.
    pub why: &'static str,
}

/// Job classes and what each runs as.
#[derive(Debug, Clone, Default)]
pub struct JobClassMappings(BTreeMap<String, Target>);

impl JobClassMappings {
    /// Adds `CLASS=shell:COMMAND` or `CLASS=http:URL`; a later mapping of a class replaces an
    /// earlier one.
    pub fn add(&mut self, text: &str, origin: &str) -> Result<(), BadMapping> {
        let bad = |why| BadMapping {
            origin: origin.to_string(),
            line: text.to_string(),
            why,
        };
        let (class, target) = text
            .split_once('=')
            .ok_or_else(|| bad("expected CLASS=shell:COMMAND or CLASS=http:URL"))?;
        let class = class.trim();
        if class.is_empty() {
            return Err(bad("the class is empty"));
        }
        let target = match target.trim_start().split_once(':') {
            Some(("shell", command)) if !command.trim().is_empty() => {
                Target::Shell(command.trim().to_string())
            }
            Some(("http", url)) if url.starts_with("http://") || url.starts_with("https://") => {
                Target::Http(url.trim().to_string())
            }
            Some(("http", _)) => {
                return Err(bad("an http mapping needs an http:// or https:// URL"));
            }
            Some(("shell", _)) => return Err(bad("a shell mapping needs a command")),
            _ => return Err(bad("the target must start with shell: or http:")),
        };
        self.0.insert(class.to_string(), target);
        Ok(())
    }

    /// Adds every mapping of a `--job-classes` file: one a line; blank lines and lines starting
    /// with `#` are skipped.
    pub fn add_file(&mut self, text: &str, file: &str) -> Result<(), BadMapping> {
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            self.add(trimmed, &format!("{file} line {}", i + 1))?;
        }
        Ok(())
    }

    /// What `class` runs as, if it is mapped.
    pub fn get(&self, class: &str) -> Option<&Target> {
        self.0.get(class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_shell_and_http_targets_and_names_bad_lines() {
        let mut m = JobClassMappings::default();
        m.add("com.acme.Report=shell:/opt/report.sh --all", "--job-class")
            .unwrap();
        m.add_file(
            "# comment\n\ncom.acme.Ping = http:https://example.test/ping\n",
            "classes.txt",
        )
        .unwrap();
        assert_eq!(
            m.get("com.acme.Report"),
            Some(&Target::Shell("/opt/report.sh --all".into()))
        );
        assert_eq!(
            m.get("com.acme.Ping"),
            Some(&Target::Http("https://example.test/ping".into()))
        );
        let error = m.add_file("a=b\n", "f").unwrap_err();
        assert_eq!(error.origin, "f line 1");
        assert!(m.add("x=http:ftp://a", "o").is_err());
        assert!(m.add("=shell:true", "o").is_err());
        assert!(m.add("x=shell:  ", "o").is_err());
    }
}
