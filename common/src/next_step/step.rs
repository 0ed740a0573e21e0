//! The manager's next step as the harness reads it: its route, task and state, the layer that
//! parsed it, and why a reply is not one.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    Cli,
    Gui,
    Done,
    Blocked,
    Invalid,
    Ask,
}

impl Route {
    /// Every route, in the order the manager's prompt lists them (`invalid` last).
    pub const ALL: [Route; 6] = [
        Route::Cli,
        Route::Gui,
        Route::Done,
        Route::Blocked,
        Route::Ask,
        Route::Invalid,
    ];

    /// Whether the manager may choose this route: `gui` only when a worker serves it, `invalid`
    /// never (the harness treats it as an unusable reply and asks again).
    pub fn offered(self, gui_offered: bool) -> bool {
        match self {
            Route::Cli | Route::Done | Route::Blocked | Route::Ask => true,
            Route::Gui => gui_offered,
            Route::Invalid => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Route::Cli => "cli",
            Route::Gui => "gui",
            Route::Done => "done",
            Route::Blocked => "blocked",
            Route::Invalid => "invalid",
            Route::Ask => "ask",
        }
    }

    pub fn parse_word(word: &str) -> Option<Route> {
        let w: String = word
            .trim()
            .trim_matches(|c: char| !c.is_ascii_alphanumeric())
            .to_ascii_lowercase();
        match w.as_str() {
            "cli" => Some(Route::Cli),
            "gui" => Some(Route::Gui),
            "done" => Some(Route::Done),
            "blocked" => Some(Route::Blocked),
            "invalid" => Some(Route::Invalid),
            "ask" => Some(Route::Ask),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextStep {
    pub route: Route,
    /// The bounded instruction (cli/gui), the question (ask) or the reason (blocked/done).
    pub task: String,
    /// The manager's own summary of where the task stands; carried into the next prompt.
    pub task_state: Option<String>,
    /// Which layer parsed the reply.
    pub parsed_from: ParseLayer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParseLayer {
    Json,
    Lines,
    /// `Next:` and `Task:` run together on one line (weak models do this often).
    Inline,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NextStepError {
    #[error("the reply is empty")]
    Empty,
    #[error("no `Next:` line and no JSON object with a `next` key")]
    NoRoute,
    #[error("`Next: {word}` is not one of cli, gui, done, blocked, invalid, ask")]
    UnknownRoute { word: String },
    #[error("`Next: {route}` needs a non-empty `Task:`")]
    MissingTask { route: String },
    #[error("the `{route}` route is not available here (no worker serves it); use cli")]
    RouteNotOffered { route: String },
    #[error(
        "`Next: ask` needs a question a person can answer, and this one {why}; ask something \
         the goal does not already say, or reply `Next: cli` with a step"
    )]
    NotAQuestion { why: String },
}
