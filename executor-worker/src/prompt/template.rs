//! The executor's prompts use the one template mechanism (`loopgate_common::prompt_template`):
//! a template is filled without the line break that ends its file.

pub(crate) use loopgate_common::prompt_template::text;

/// `template` (see [`text`]) with each `{name}` of `values` replaced by its value, in one pass.
pub(crate) fn fill(template: &'static str, values: &[(&str, &str)]) -> String {
    loopgate_common::prompt_template::fill(text(template), values)
}
