//! The judge-output corpus: malformed and adversarial replies with the parse they must give.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

use std::collections::BTreeMap;

use super::*;
use loopgate_protocol::rubric::*;

fn dim(name: &str, weight: f64) -> RubricDimension {
    RubricDimension {
        name: name.to_string(),
        weight,
        description: format!("how good the {name} is"),
    }
}

/// Correctness counts double; pass at 8.0.
fn rubric() -> Rubric {
    Rubric {
        dimensions: vec![
            dim("Correctness", 2.0),
            dim("Code quality", 1.0),
            dim("Test coverage", 1.0),
        ],
        threshold: 8.0,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Passes,
    Below,
    Pivots,
    Refused,
}

enum Expect {
    Fails(RubricParseError),
    Parses {
        layer: ScoreLayer,
        average: f64,
        strategy: Option<Strategy>,
        outcome: Outcome,
        /// `(correctness, code quality, test coverage)`, `None` where not scored.
        scores: [Option<f64>; 3],
    },
}

fn parses(
    layer: ScoreLayer,
    average: f64,
    strategy: Option<Strategy>,
    outcome: Outcome,
    scores: [Option<f64>; 3],
) -> Expect {
    Expect::Parses {
        layer,
        average,
        strategy,
        outcome,
        scores,
    }
}

fn outcome_kind(outcome: &RubricOutcome, average: f64) -> Outcome {
    let same = |a: f64, t: f64| {
        assert!(
            (a - average).abs() < 1e-9,
            "outcome average {a} != {average}"
        );
        assert!((t - 8.0).abs() < 1e-12, "outcome threshold {t}");
    };
    match *outcome {
        RubricOutcome::Pass => Outcome::Passes,
        RubricOutcome::Pivot => Outcome::Pivots,
        RubricOutcome::BelowThreshold { average, threshold } => {
            same(average, threshold);
            Outcome::Below
        }
        RubricOutcome::FinishRefused { average, threshold } => {
            same(average, threshold);
            Outcome::Refused
        }
    }
}

const ALL: [Option<f64>; 3] = [Some(9.0), Some(8.0), Some(8.0)];

fn corpus() -> Vec<(&'static str, String, Expect)> {
    use Outcome::*;
    use ScoreLayer::*;
    use Strategy::*;
    let s = |t: &str| t.to_string();
    vec![
        ("empty string", s(""), Expect::Fails(RubricParseError::Empty)),
        ("whitespace only", s(" \n\t  \r\n"), Expect::Fails(RubricParseError::Empty)),
        (
            "prose only",
            s("The code looks fine overall and the tests pass. Nice work, ship it."),
            Expect::Fails(RubricParseError::NoScores),
        ),
        (
            "prose with a strategy but no score",
            s("I recommend we REFINE the error handling before going further."),
            Expect::Fails(RubricParseError::NoScores),
        ),
        (
            "canonical fenced json",
            s("Here is my evaluation.\n```json\n{\"scores\": {\"correctness\": 9, \"code_quality\": 8, \"test_coverage\": 8}, \"strategy\": \"FINISH\"}\n```\n"),
            parses(Json, 8.5, Some(Finish), Passes, ALL),
        ),
        (
            "bare json inside prose",
            s("Verdict: {\"scores\": {\"Correctness\": 9, \"Code Quality\": 8, \"Test-Coverage\": 8}, \"strategy\": \"refine\"} -- that is all."),
            parses(Json, 8.5, Some(Refine), Passes, ALL),
        ),
        (
            "missing dimension averaged over those present",
            s("```json\n{\"scores\": {\"correctness\": 9, \"code quality\": 7}}\n```"),
            parses(Json, 25.0 / 3.0, None, Passes, [Some(9.0), Some(7.0), None]),
        ),
        (
            "flat dimension keys, no scores key, average exactly at threshold",
            s("{\"CORRECTNESS\": 8, \"code-quality\": 8, \"Test_Coverage\": 8, \"decision\": \"Refine\"}"),
            parses(Json, 8.0, Some(Refine), Passes, [Some(8.0), Some(8.0), Some(8.0)]),
        ),
        (
            "score 11 is ignored",
            s("{\"scores\": {\"correctness\": 11, \"code quality\": 9, \"test coverage\": 9}, \"strategy\": \"FINISH\"}"),
            parses(Json, 9.0, Some(Finish), Passes, [None, Some(9.0), Some(9.0)]),
        ),
        (
            "score -1 is ignored",
            s("{\"scores\": {\"correctness\": 9, \"code quality\": -1, \"test coverage\": 6}}"),
            parses(Json, 8.0, None, Passes, [Some(9.0), None, Some(6.0)]),
        ),
        (
            "x/100, percent and x/10 strings are scaled",
            s("{\"scores\": {\"correctness\": \"85/100\", \"code quality\": \"90%\", \"test coverage\": \"8/10\"}}"),
            parses(Json, 8.5, None, Passes, [Some(8.5), Some(9.0), Some(8.0)]),
        ),
        (
            "all json scores out of range falls through to lines",
            s("{\"scores\": {\"correctness\": 85, \"code quality\": 90, \"test coverage\": 70}}\nOn a ten-point scale:\nCorrectness: 7/10\nCode quality: 6\nTest coverage: 5\n"),
            parses(DimensionLines, 6.25, None, Below, [Some(7.0), Some(6.0), Some(5.0)]),
        ),
        (
            "two json blocks, the first without scores",
            s("```json\n{\"note\": \"draft, ignore\", \"strategy\": \"PIVOT|REFINE\"}\n```\nFinal:\n```json\n{\"scores\": {\"correctness\": 9, \"code_quality\": 8, \"test_coverage\": 8}, \"strategy\": \"FINISH\"}\n```"),
            parses(Json, 8.5, Some(Finish), Passes, ALL),
        ),
        (
            "two json blocks with scores, the first wins",
            s("```json\n{\"scores\": {\"correctness\": 6, \"code_quality\": 6, \"test_coverage\": 6}, \"strategy\": \"REFINE\"}\n```\nOn reflection:\n```json\n{\"scores\": {\"correctness\": 10, \"code_quality\": 10, \"test_coverage\": 10}, \"strategy\": \"FINISH\"}\n```"),
            parses(Json, 6.0, Some(Refine), Below, [Some(6.0), Some(6.0), Some(6.0)]),
        ),
        (
            "chinese key names",
            s("评审结果：\n```json\n{\"评分\": {\"correctness\": 9, \"code quality\": 8, \"test coverage\": 8}, \"策略\": \"FINISH\", \"总分\": 8.5}\n```"),
            parses(Json, 8.5, Some(Finish), Passes, ALL),
        ),
        (
            "chinese keys and a chinese strategy value",
            s("{\"分数\": {\"Correctness\": 10, \"Code quality\": 10, \"Test coverage\": 10}, \"决定\": \"转向\", \"综合得分\": 10}"),
            parses(Json, 10.0, Some(Pivot), Pivots, [Some(10.0), Some(10.0), Some(10.0)]),
        ),
        (
            "PIVOT with perfect scores",
            s("```json\n{\"scores\": {\"correctness\": 10, \"code_quality\": 10, \"test_coverage\": 10}, \"strategy\": \"PIVOT\", \"reason\": \"wrong approach\"}\n```"),
            parses(Json, 10.0, Some(Pivot), Pivots, [Some(10.0), Some(10.0), Some(10.0)]),
        ),
        (
            "FINISH below threshold is refused",
            s("```json\n{\"scores\": {\"correctness\": 6, \"code_quality\": 7, \"test_coverage\": 7}, \"strategy\": \"FINISH\"}\n```"),
            parses(Json, 6.5, Some(Finish), Refused, [Some(6.0), Some(7.0), Some(7.0)]),
        ),
        (
            "REFINE below threshold",
            s("{\"scores\": {\"correctness\": 7, \"code_quality\": 7, \"test_coverage\": 7}, \"recommendation\": \"REFINE: add tests\"}"),
            parses(Json, 7.0, Some(Refine), Below, [Some(7.0), Some(7.0), Some(7.0)]),
        ),
        (
            "trailing commas",
            s("```json\n{\n  \"scores\": {\n    \"correctness\": 9,\n    \"code_quality\": 8,\n  },\n  \"strategy\": \"FINISH\",\n}\n```"),
            parses(Json, 26.0 / 3.0, Some(Finish), Passes, [Some(9.0), Some(8.0), None]),
        ),
        (
            "numbers as strings",
            s("{\"scores\": {\"correctness\": \"8.5\", \"code quality\": \"9\", \"test coverage\": \"7.5\"}}"),
            parses(Json, 8.375, None, Passes, [Some(8.5), Some(9.0), Some(7.5)]),
        ),
        (
            "list-shaped scores with name synonyms",
            s("{\"ratings\": [{\"name\": \"Correctness\", \"score\": 9}, {\"dimension\": \"code_quality\", \"score\": \"8/10\"}, {\"criterion\": \"Test Coverage\", \"value\": 7}], \"recommendation\": \"refine\"}"),
            parses(Json, 8.25, Some(Refine), Passes, [Some(9.0), Some(8.0), Some(7.0)]),
        ),
        (
            "a bare top-level list of named scores",
            s("[{\"name\": \"correctness\", \"score\": 8}, {\"name\": \"code quality\", \"score\": 8}, {\"name\": \"test coverage\", \"score\": 8}]\nFINISH"),
            parses(Json, 8.0, Some(Finish), Passes, [Some(8.0), Some(8.0), Some(8.0)]),
        ),
        (
            "scores as objects with reasons",
            s("{\"scores\": {\"correctness\": {\"score\": 9, \"reason\": \"all checks pass\"}, \"code quality\": {\"rating\": 8}, \"test coverage\": {\"score\": \"8\"}}}"),
            parses(Json, 8.5, None, Passes, ALL),
        ),
        (
            "markdown table with a weight column",
            s("| Dimension | Weight | Score |\n|---|---|---|\n| Correctness | 2 | 9/10 |\n| Code quality | 1 | 8/10 |\n| **Test coverage** | 1 | 7/10 |\n\nStrategy: REFINE"),
            parses(DimensionLines, 8.25, Some(Refine), Passes, [Some(9.0), Some(8.0), Some(7.0)]),
        ),
        (
            "markdown bold lines",
            s("**Correctness**: 9/10\n**Code quality** — 8\n**Test coverage:** 7 out of 10\n\n**Decision:** FINISH"),
            parses(DimensionLines, 8.25, Some(Finish), Passes, [Some(9.0), Some(8.0), Some(7.0)]),
        ),
        (
            "numbered, weighted, hyphenated and shouted labels",
            s("1. Correctness (weight 2): 8 out of 10\n2. Code-quality - 6\n3. - TEST_COVERAGE = 7.5\n"),
            parses(DimensionLines, 7.375, None, Below, [Some(8.0), Some(6.0), Some(7.5)]),
        ),
        (
            "score lines with x/5 and percent, full-width colon",
            s("Correctness：4/5\nCode quality: 90%\nTest coverage score: 7"),
            parses(DimensionLines, 8.0, None, Passes, [Some(8.0), Some(9.0), Some(7.0)]),
        ),
        (
            "explanations with other numbers around the score",
            s("Correctness: handles all 12 edge cases; score 9/10\nCode quality: 8 - though 3/4 helpers lack docs\nTest coverage: good (7)\nStrategy: refine"),
            parses(DimensionLines, 8.25, Some(Refine), Passes, [Some(9.0), Some(8.0), Some(7.0)]),
        ),
        (
            "unknown dimension names ignored",
            s("{\"scores\": {\"correctness\": 9, \"style\": 2, \"performance\": 1, \"code quality\": 9, \"test coverage\": 9}, \"strategy\": \"FINISH\"}"),
            parses(Json, 9.0, Some(Finish), Passes, [Some(9.0), Some(9.0), Some(9.0)]),
        ),
        (
            "only unknown dimension names",
            s("{\"scores\": {\"style\": 9, \"speed\": 8}, \"strategy\": \"FINISH\"}\nStyle: 9/10"),
            Expect::Fails(RubricParseError::NoScores),
        ),
        (
            "overall line only",
            s("I reviewed the snapshot carefully.\nOverall: 8.2/10\nREFINE the docs next time."),
            parses(OverallLine, 8.2, Some(Refine), Passes, [None, None, None]),
        ),
        (
            "average score line below threshold",
            s("Some concerns remain.\n\nAverage score: 7.9"),
            parses(OverallLine, 7.9, None, Below, [None, None, None]),
        ),
        (
            "final score line with FINISH below threshold",
            s("Final score = 7\nFINISH"),
            parses(OverallLine, 7.0, Some(Finish), Refused, [None, None, None]),
        ),
        (
            "overall out of range is ignored, the next overall line used",
            s("Overall: 85\nTotal score: 91%\n"),
            parses(OverallLine, 9.1, None, Passes, [None, None, None]),
        ),
        (
            "json with only an overall score",
            s("{\"overall_score\": 8.8, \"strategy\": \"finish\"}"),
            parses(Json, 8.8, Some(Finish), Passes, [None, None, None]),
        ),
        (
            "nested json in prose with braces",
            s("My evaluation {as requested}: {\"evaluation\": {\"scores\": {\"correctness\": 9, \"code quality\": 8, \"test coverage\": 8}, \"strategy\": \"REFINE\"}} end of {report"),
            parses(Json, 8.5, Some(Refine), Passes, ALL),
        ),
        (
            "unclosed json block falls back to its lines",
            s("```json\n{\n  \"correctness\": 9,\n  \"code_quality\": 8,\n  \"test_coverage\": 9,\n  \"strategy\": \"FINISH\"\n```"),
            parses(DimensionLines, 8.75, Some(Finish), Passes, [Some(9.0), Some(8.0), Some(9.0)]),
        ),
        (
            "template echoed back",
            s("Correctness: <0-10>\nCode quality: 0-10\nStrategy: FINISH | REFINE | PIVOT"),
            Expect::Fails(RubricParseError::NoScores),
        ),
        (
            "template strategy in json, real one in prose",
            s("{\"scores\": {\"correctness\": 9, \"code quality\": 8, \"test coverage\": 8}, \"strategy\": \"FINISH|REFINE|PIVOT\"}\nHaving weighed FINISH, REFINE or PIVOT, I choose PIVOT."),
            parses(Json, 8.5, Some(Pivot), Pivots, ALL),
        ),
        (
            "capitals preferred over an earlier lowercase word",
            s("Correctness: 9\nCode quality: 9\nTest coverage: 9\nThe agent did not finish the docs, so: REFINE"),
            parses(DimensionLines, 9.0, Some(Refine), Passes, [Some(9.0), Some(9.0), Some(9.0)]),
        ),
        (
            "lowercase strategy word when no capitals",
            s("Correctness: 9\nCode quality: 9\nTest coverage: 9\nwe should pivot to a streaming design."),
            parses(DimensionLines, 9.0, Some(Pivot), Pivots, [Some(9.0), Some(9.0), Some(9.0)]),
        ),
        (
            "strategy-like words inside other words are not strategies",
            s("Correctness: 9\nCode quality: 9\nTest coverage: 9\nA pivotal refinement; the work is finished."),
            parses(DimensionLines, 9.0, None, Passes, [Some(9.0), Some(9.0), Some(9.0)]),
        ),
        (
            "scores written as words only",
            s("{\"scores\": {\"correctness\": \"N/A\", \"code quality\": \"nine\"}}"),
            Expect::Fails(RubricParseError::NoScores),
        ),
        (
            "zero is a valid score, 10.5 is not",
            s("- Correctness: 0/10\n- Code quality: 10.5\n- Test coverage: 10"),
            parses(DimensionLines, 10.0 / 3.0, None, Below, [Some(0.0), None, Some(10.0)]),
        ),
        (
            "repeated dimension keeps the first score",
            s("Correctness: 9\nCorrectness: 2\nCode quality: 8\nTest coverage: 8\nFINISH"),
            parses(DimensionLines, 8.5, Some(Finish), Passes, ALL),
        ),
        (
            "judge's overall disagrees: the weighted average counts",
            s("{\"scores\": {\"correctness\": 6, \"code quality\": 6, \"test coverage\": 6}, \"overall\": 9.5, \"strategy\": \"FINISH\"}"),
            parses(Json, 6.0, Some(Finish), Refused, [Some(6.0), Some(6.0), Some(6.0)]),
        ),
        (
            "emoji bullets and full-width slash",
            s("✅ Correctness：9／10\n✅ Code quality → 8\n❌ Test coverage — 8\n决定：FINISH"),
            parses(DimensionLines, 8.5, Some(Finish), Passes, ALL),
        ),
        (
            "huge repeated input with scores at the end",
            format!(
                "{}{}",
                "blah { [ \"unterminated ".repeat(50_000),
                "\nCorrectness: 9\nCode quality: 8\nTest coverage: 8\nFINISH\n"
            ),
            parses(DimensionLines, 8.5, Some(Finish), Passes, ALL),
        ),
        (
            "huge run of open braces",
            "{".repeat(1_000_000),
            Expect::Fails(RubricParseError::NoScores),
        ),
        (
            "huge repeated score lines",
            "Correctness: 8/10\nCode quality: 8\n".repeat(200_000),
            parses(DimensionLines, 8.0, None, Passes, [Some(8.0), Some(8.0), None]),
        ),
    ]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn judge_output_corpus() {
    let rubric = rubric();
    let names = ["Correctness", "Code quality", "Test coverage"];
    let cases = corpus();
    assert!(cases.len() >= 30, "corpus has {} cases", cases.len());
    for (name, text, expect) in cases {
        let got = parse_rubric_reply(&text, &rubric);
        match expect {
            Expect::Fails(want) => assert_eq!(got, Err(want), "case '{name}'"),
            Expect::Parses {
                layer,
                average,
                strategy,
                outcome,
                scores,
            } => {
                let got = got.unwrap_or_else(|e| panic!("case '{name}': {e:?}"));
                assert_eq!(got.layer, layer, "case '{name}': layer ({got:?})");
                assert!(
                    close(got.weighted_average, average),
                    "case '{name}': average {} != {average} ({got:?})",
                    got.weighted_average
                );
                assert_eq!(got.strategy, strategy, "case '{name}': strategy");
                for (dim, want) in names.iter().zip(scores) {
                    let have = got.scores.get(*dim).copied();
                    let same = match (have, want) {
                        (Some(h), Some(w)) => close(h, w),
                        (None, None) => true,
                        _ => false,
                    };
                    assert!(same, "case '{name}': {dim} = {have:?}, want {want:?}");
                }
                assert_eq!(
                    got.scores.len(),
                    scores.iter().flatten().count(),
                    "case '{name}'"
                );
                let kind = outcome_kind(&rubric_outcome(&got, &rubric), got.weighted_average);
                assert_eq!(kind, outcome, "case '{name}': outcome");
            }
        }
    }
}

#[test]
fn ignored_and_missing_scores_leave_notes() {
    let rubric = rubric();
    let text = "{\"scores\": {\"correctness\": 11, \"code quality\": 9, \"style\": 3}}";
    let got = parse_rubric_reply(text, &rubric).unwrap();
    let notes = got.notes.join("\n");
    assert!(notes.contains("Correctness"), "{notes}");
    assert!(notes.contains("style"), "{notes}");
    assert!(notes.contains("Test coverage"), "{notes}");

    // A layer that yields nothing still reports what it ignored.
    let got =
        parse_rubric_reply("{\"scores\": {\"correctness\": 85}}\nOverall: 8", &rubric).unwrap();
    assert_eq!(got.layer, ScoreLayer::OverallLine);
    assert!(
        got.notes.iter().any(|n| n.contains("85")),
        "{:?}",
        got.notes
    );
}

#[test]
fn no_prefix_of_the_corpus_panics() {
    let rubric = rubric();
    for (_, text, _) in corpus().into_iter().filter(|(_, t, _)| t.len() < 4096) {
        for (cut, _) in text.char_indices() {
            let _ = parse_rubric_reply(&text[..cut], &rubric);
            let _ = parse_rubric_reply(&text[cut..], &rubric);
        }
    }
    // Odd rubrics must not panic either.
    let odd = Rubric {
        dimensions: vec![dim("", 0.0), dim("x", f64::NAN), dim("y", f64::INFINITY)],
        threshold: f64::NAN,
    };
    for text in ["x: 5\ny: 7", "{\"x\": 5}", "Overall: 3", "nothing"] {
        if let Ok(score) = parse_rubric_reply(text, &odd) {
            assert!(score.weighted_average.is_finite());
            assert!(!rubric_outcome(&score, &odd).is_pass());
        }
    }
}

#[test]
fn outcome_table() {
    let rubric = rubric();
    let score = |average: f64, strategy: Option<Strategy>| RubricScore {
        scores: BTreeMap::new(),
        weighted_average: average,
        strategy,
        layer: ScoreLayer::OverallLine,
        notes: Vec::new(),
    };
    let below = |average| RubricOutcome::BelowThreshold {
        average,
        threshold: 8.0,
    };
    let refused = |average| RubricOutcome::FinishRefused {
        average,
        threshold: 8.0,
    };
    let cases = [
        (score(8.0, None), RubricOutcome::Pass),
        (score(9.0, Some(Strategy::Finish)), RubricOutcome::Pass),
        (score(9.0, Some(Strategy::Refine)), RubricOutcome::Pass),
        (score(10.0, Some(Strategy::Pivot)), RubricOutcome::Pivot),
        (score(2.0, Some(Strategy::Pivot)), RubricOutcome::Pivot),
        (score(7.99, Some(Strategy::Finish)), refused(7.99)),
        (score(7.99, Some(Strategy::Refine)), below(7.99)),
        (score(0.0, None), below(0.0)),
    ];
    for (score, want) in cases {
        let got = rubric_outcome(&score, &rubric);
        assert_eq!(got, want, "{score:?}");
        assert_eq!(got.is_pass(), want == RubricOutcome::Pass);
    }
    let nan = rubric_outcome(&score(f64::NAN, None), &rubric);
    assert!(matches!(nan, RubricOutcome::BelowThreshold { .. }));
}

#[test]
fn rubric_validation_table() {
    let with = |dimensions: Vec<RubricDimension>, threshold: f64| Rubric {
        dimensions,
        threshold,
    };
    let ok = || vec![dim("Correctness", 2.0), dim("Code quality", 1.0)];
    let cases: Vec<(&str, Rubric, Result<(), fn(&RubricError) -> bool>)> = vec![
        ("valid", with(ok(), 8.5), Ok(())),
        ("threshold 10 is allowed", with(ok(), 10.0), Ok(())),
        (
            "no dimensions",
            with(vec![], 8.0),
            Err(|e| matches!(e, RubricError::NoDimensions)),
        ),
        (
            "empty name",
            with(vec![dim(" ", 1.0)], 8.0),
            Err(|e| matches!(e, RubricError::EmptyName { index: 0 })),
        ),
        (
            "duplicate names ignoring case",
            with(vec![dim("Correctness", 1.0), dim("correctness", 1.0)], 8.0),
            Err(|e| matches!(e, RubricError::DuplicateName { .. })),
        ),
        (
            "duplicate names ignoring underscores",
            with(
                vec![dim("code quality", 1.0), dim("Code_Quality", 1.0)],
                8.0,
            ),
            Err(|e| matches!(e, RubricError::DuplicateName { .. })),
        ),
        (
            "zero weight",
            with(vec![dim("a", 0.0)], 8.0),
            Err(|e| matches!(e, RubricError::InvalidWeight { .. })),
        ),
        (
            "negative weight",
            with(vec![dim("a", -1.0)], 8.0),
            Err(|e| matches!(e, RubricError::InvalidWeight { .. })),
        ),
        (
            "nan weight",
            with(vec![dim("a", f64::NAN)], 8.0),
            Err(|e| matches!(e, RubricError::InvalidWeight { .. })),
        ),
        (
            "infinite weight",
            with(vec![dim("a", f64::INFINITY)], 8.0),
            Err(|e| matches!(e, RubricError::InvalidWeight { .. })),
        ),
        (
            "threshold 0",
            with(ok(), 0.0),
            Err(|e| matches!(e, RubricError::InvalidThreshold { .. })),
        ),
        (
            "threshold above 10",
            with(ok(), 10.5),
            Err(|e| matches!(e, RubricError::InvalidThreshold { .. })),
        ),
        (
            "nan threshold",
            with(ok(), f64::NAN),
            Err(|e| matches!(e, RubricError::InvalidThreshold { .. })),
        ),
    ];
    for (name, rubric, want) in cases {
        match (rubric.validate(), want) {
            (Ok(()), Ok(())) => {}
            (Err(got), Err(is)) => assert!(is(&got), "case '{name}': {got:?}"),
            (got, _) => panic!("case '{name}': got {got:?}"),
        }
    }
}

#[test]
fn rubric_and_score_serde() {
    let rubric: Rubric = serde_json::from_value(serde_json::json!({
        "dimensions": [
            {"name": "Correctness", "weight": 2.0, "description": "does it work"},
            {"name": "Code quality"}
        ],
        "threshold": 8.5
    }))
    .unwrap();
    assert_eq!(rubric.dimensions[1].weight, 1.0);
    assert_eq!(rubric.dimensions[1].description, "");
    rubric.validate().unwrap();

    let dims: Vec<RubricDimension> = toml::from_str::<toml::Table>(
        "[[rubric]]\nname = \"Correctness\"\nweight = 2.0\ndescription = \"does it work\"\n",
    )
    .unwrap()
    .remove("rubric")
    .unwrap()
    .try_into()
    .unwrap();
    assert_eq!(dims[0].name, "Correctness");

    assert_eq!(serde_json::to_value(Strategy::Pivot).unwrap(), "pivot");
    assert_eq!(
        serde_json::to_value(ScoreLayer::DimensionLines).unwrap(),
        "dimension_lines"
    );
    let score = parse_rubric_reply("Overall: 9\nFINISH", &rubric).unwrap();
    let back: RubricScore = serde_json::from_str(&serde_json::to_string(&score).unwrap()).unwrap();
    assert_eq!(back, score);
}
