//! What the tool loop asks: anything that answers chat requests, [`ChatClient`] in production.

use std::future::Future;

use loopgate_models::{ChatClient, ChatRequest, ChatResponse, ModelError};

/// Anything that answers chat requests; `ChatClient` in production.
pub trait ChatModel: Sync {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send;

    /// The model's context window in tokens, when known.
    fn context_window(&self) -> Option<u32> {
        None
    }

    /// Whether the model reads images (its profile's `vision`): screenshots then go with
    /// their tool results.
    fn vision(&self) -> bool {
        false
    }

    /// The profile's `temperature`, when it sets one (retries raise it: see `temperature`).
    fn temperature(&self) -> Option<f32> {
        None
    }
}

impl ChatModel for ChatClient {
    fn chat(
        &self,
        req: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResponse, ModelError>> + Send {
        ChatClient::chat(self, req)
    }

    fn context_window(&self) -> Option<u32> {
        self.profile().context_window
    }

    fn vision(&self) -> bool {
        self.profile().vision
    }

    fn temperature(&self) -> Option<f32> {
        self.profile().temperature
    }
}
