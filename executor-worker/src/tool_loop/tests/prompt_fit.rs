//! A first prompt that exceeds the model's window: the loop goes on with the smaller versions
//! of it the episode gave, and ends at once when none is left.

use super::*;

/// Refuses, as llama.cpp's server does, any request whose text is over `window` characters;
/// otherwise calls `finish`. Records what it was sent.
struct WindowModel {
    window: usize,
    seen: Mutex<Vec<ChatRequest>>,
}

impl WindowModel {
    fn new(window: usize) -> Self {
        WindowModel {
            window,
            seen: Mutex::new(Vec::new()),
        }
    }
}

impl ChatModel for WindowModel {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send {
        self.seen.lock().unwrap().push(req.clone());
        let chars = user_text(req).len();
        let answer = if chars > self.window {
            http_error(
                400,
                &format!(
                    r#"{{"error":{{"code":400,"message":"request ({chars} tokens) exceeds the available context size ({} tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":{chars},"n_ctx":{}}}}}"#,
                    self.window, self.window
                ),
            )
        } else {
            Ok(reply(None, vec![("finish", json!({"summary": "done"}))]))
        };
        async move { answer }
    }
}

fn task(user: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::system("sys"), ChatMessage::user(user)]
}

#[tokio::test]
async fn a_first_prompt_over_the_window_goes_on_with_the_next_smaller_one() {
    let (_dir, tools) = scratch_tools();
    let model = WindowModel::new(100);
    let prompt = EpisodePrompt::new(task(&"a".repeat(300)))
        .or_smaller(task(&"b".repeat(200)))
        .or_smaller(task(&"c".repeat(50)))
        .or_smaller(task("never needed"));
    let report = run_tool_loop(&model, &tools, prompt, limits(5)).await;
    assert!(matches!(report.end, LoopEnd::Finished { .. }), "{report:?}");
    assert_eq!((report.smaller_prompts, report.resets), (2, 0));
    // The refused calls generated nothing: they spend no step.
    assert_eq!(report.steps, 1);
    let seen = model.seen.lock().unwrap();
    let firsts: Vec<char> = seen
        .iter()
        .map(|r| user_text(r).chars().next().unwrap())
        .collect();
    assert_eq!(firsts, ['a', 'b', 'c']);
}

#[tokio::test]
async fn a_first_prompt_over_the_window_with_nothing_smaller_ends_the_loop_at_once() {
    let (_dir, tools) = scratch_tools();
    let model = WindowModel::new(100);
    // Resets are left, but a fresh agent would start from the same prompt.
    let report = run_tool_loop(&model, &tools, task(&"a".repeat(300)), small_window(3)).await;
    assert!(
        matches!(&report.end, LoopEnd::ModelFailed(e) if e.kind() == ModelErrorKind::ContextLength),
        "{report:?}"
    );
    assert_eq!((report.smaller_prompts, report.resets), (0, 0));
    assert_eq!(model.seen.lock().unwrap().len(), 1);
}
