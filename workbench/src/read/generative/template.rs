//! Chat templates: the Jinja template of the GGUF (`tokenizer.chat_template`) rendered with
//! minijinja the way `transformers`' `apply_chat_template` renders it (`trim_blocks`,
//! `lstrip_blocks`, loop controls, `raise_exception`, Python string/dict methods through
//! minijinja-contrib's `pycompat`).

use minijinja::{context, Environment, ErrorKind};
use serde::{Deserialize, Serialize};

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }
}

/// Render `template` over `messages`. Errors come back as minijinja's message (with the
/// template line), for the caller to wrap with the file name.
pub(crate) fn render(
    template: &str,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> std::result::Result<String, String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    minijinja_contrib::add_to_environment(&mut env);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                ErrorKind::InvalidOperation,
                format!("the template raised: {msg}"),
            ))
        },
    );
    let describe = |e: minijinja::Error| {
        let mut s = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(inner) = src {
            s.push_str(&format!(": {inner}"));
            src = inner.source();
        }
        s
    };
    env.add_template("chat", template).map_err(describe)?;
    let tmpl = env.get_template("chat").map_err(describe)?;
    tmpl.render(context! {
        messages => messages,
        add_generation_prompt => add_generation_prompt,
        bos_token => bos_token,
        eos_token => eos_token,
    })
    .map_err(describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs() -> Vec<ChatMessage> {
        vec![ChatMessage::system("Be brief."), ChatMessage::user("Hi?")]
    }

    #[test]
    fn renders_chatml_and_python_methods() {
        let t = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m['content'].strip() }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
        let out = render(t, &msgs(), true, "", "").unwrap();
        assert_eq!(
            out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\n"
        );
        let out = render(t, &msgs(), false, "", "").unwrap();
        assert!(!out.ends_with("assistant\n"));
    }

    #[test]
    fn errors_are_reported() {
        assert!(render("{% for m in messages %}", &msgs(), true, "", "").is_err());
        let e = render(
            "{{ raise_exception('no system role') }}",
            &msgs(),
            true,
            "",
            "",
        )
        .unwrap_err();
        assert!(e.contains("no system role"), "{e}");
        let e = render(
            "{{ messages[0].content.nonexistent_method() }}",
            &msgs(),
            true,
            "",
            "",
        )
        .unwrap_err();
        assert!(e.contains("nonexistent_method"), "{e}");
    }
}
