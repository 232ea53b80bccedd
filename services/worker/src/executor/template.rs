//! Command templates: job kinds that run as a configured command (`[executors.hive] command =
//! ["hive", "-e", "{content}"]`). Each `{name}` in an argument becomes the task spec's field
//! `name`, or the task's `task_id`, `attempt` or `data_time`; `{{` and `}}` are literal braces.

use chime_core::config::CommandTemplate;
use chime_core::model::{ShellCommand, ShellSpec, TaskMessage};

/// The command `template` runs for `message`, or why it cannot be built.
pub fn render(template: &CommandTemplate, message: &TaskMessage) -> Result<ShellSpec, String> {
    let argv = template
        .command
        .iter()
        .map(|arg| substitute(arg, message))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ShellSpec {
        command: ShellCommand::Argv(argv),
        env: template.env.clone(),
        cwd: template.cwd.clone(),
    })
}

fn substitute(arg: &str, message: &TaskMessage) -> Result<String, String> {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(after) = tail.strip_prefix('{') {
            let end = after
                .find('}')
                .ok_or_else(|| format!("template argument {arg:?} has an unclosed '{{'"))?;
            out.push_str(&value(&after[..end], message)?);
            rest = &after[end + 1..];
        } else {
            return Err(format!("template argument {arg:?} has a stray '}}'"));
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn value(name: &str, message: &TaskMessage) -> Result<String, String> {
    match message.spec.get(name) {
        Some(serde_json::Value::String(text)) => return Ok(text.clone()),
        Some(serde_json::Value::Null) | None => {}
        Some(other) => return Ok(other.to_string()),
    }
    match name {
        "task_id" => Ok(message.task_id.to_string()),
        "attempt" => Ok(message.attempt.to_string()),
        "data_time" => Ok(message.data_time.map(|t| t.to_string()).unwrap_or_default()),
        _ => Err(format!(
            "the {} template needs {{{name}}}: the task's spec has no field {name:?}",
            message.kind
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(spec: serde_json::Value) -> TaskMessage {
        TaskMessage {
            v: 1,
            task_id: uuid::Uuid::nil(),
            attempt: 2,
            kind: "hive".into(),
            group: "etl".into(),
            spec,
            data: json!({}),
            data_time: None,
            timeout_ms: None,
            execute_user: None,
        }
    }

    fn template(command: &[&str]) -> CommandTemplate {
        CommandTemplate {
            command: command.iter().map(|s| s.to_string()).collect(),
            env: Default::default(),
            cwd: None,
        }
    }

    #[test]
    fn fills_placeholders_from_the_spec_and_the_task() {
        let spec = render(
            &template(&["hive", "-e", "{content}", "--try={attempt}", "{{x}}"]),
            &message(json!({"content": "select 1", "n": 3})),
        )
        .unwrap();
        assert_eq!(
            spec.command,
            ShellCommand::Argv(vec![
                "hive".into(),
                "-e".into(),
                "select 1".into(),
                "--try=2".into(),
                "{x}".into()
            ])
        );
    }

    #[test]
    fn names_a_missing_field() {
        let error =
            render(&template(&["hive", "-e", "{content}"]), &message(json!({}))).unwrap_err();
        assert!(error.contains("\"content\""), "{error}");
        assert!(render(&template(&["x", "{open"]), &message(json!({}))).is_err());
        assert!(render(&template(&["x", "close}"]), &message(json!({}))).is_err());
    }
}
