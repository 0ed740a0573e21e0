//! An episode's first prompt and smaller versions of it. When the model refuses the very first
//! call because the prompt exceeds its window, the loop goes on with the next smaller version
//! (the episode's file previews left out one by one, largest first) instead of ending the
//! episode before its first tool call. Nothing is reset and no turn is spent: the refused call
//! generated nothing.

use std::collections::VecDeque;

use loopgate_models::ChatMessage;

/// The episode's prompt (system and first user message) and the smaller versions to fall back
/// to, in the order they are tried.
#[derive(Debug, Clone, Default)]
pub struct EpisodePrompt {
    pub(crate) messages: Vec<ChatMessage>,
    pub(crate) smaller: VecDeque<Vec<ChatMessage>>,
}

impl EpisodePrompt {
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        EpisodePrompt {
            messages,
            smaller: VecDeque::new(),
        }
    }

    /// Adds a smaller version, tried after those added before it.
    pub fn or_smaller(mut self, messages: Vec<ChatMessage>) -> Self {
        self.smaller.push_back(messages);
        self
    }
}

impl From<Vec<ChatMessage>> for EpisodePrompt {
    fn from(messages: Vec<ChatMessage>) -> Self {
        EpisodePrompt::new(messages)
    }
}

/// The sets of previews to build smaller prompts from: all of `previews` but the largest,
/// then all but the two largest, down to none. `size` measures one preview.
pub(crate) fn fewer_previews<T: Clone>(previews: &[T], size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut by_size: Vec<usize> = (0..previews.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(size(&previews[i])));
    (1..=previews.len())
        .map(|dropped| {
            let left_out = &by_size[..dropped];
            previews
                .iter()
                .enumerate()
                .filter(|(i, _)| !left_out.contains(i))
                .map(|(_, p)| p.clone())
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_previews_leaves_out_the_largest_first_and_keeps_the_order() {
        let cases: Vec<(&[&str], Vec<Vec<&str>>)> = vec![
            (&[], vec![]),
            (&["aaa"], vec![vec![]]),
            (
                &["bb", "aaaa", "c"],
                vec![vec!["bb", "c"], vec!["c"], vec![]],
            ),
        ];
        for (previews, want) in cases {
            let got = fewer_previews(previews, |p| p.len());
            assert_eq!(got, want, "{previews:?}");
        }
    }
}
