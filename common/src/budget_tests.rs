//! Budget keys: defaults, ranges, and what a stored record keeps.

use super::*;

#[test]
fn overrides_apply_over_a_base() {
    let base = BudgetFile {
        max_rounds: Some(3),
        max_total_tokens: Some(100),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let resumed = BudgetFile {
        max_rounds: Some(10),
        ..Default::default()
    }
    .validate_over(&base)
    .unwrap();
    assert_eq!(resumed.max_rounds, 10);
    assert_eq!(resumed.max_total_tokens, Some(100));
    let cost = BudgetFile {
        max_cost_usd: Some(1.5),
        ..Default::default()
    }
    .validate()
    .unwrap();
    assert_eq!(cost.max_cost_micros, Some(1_500_000));
    for bad in [
        BudgetFile {
            max_cost_usd: Some(-1.0),
            ..Default::default()
        },
        BudgetFile {
            max_cost_usd: Some(f64::NAN),
            ..Default::default()
        },
        BudgetFile {
            max_wall_secs: Some(0),
            ..Default::default()
        },
        BudgetFile {
            max_failed_rounds: Some(0),
            ..Default::default()
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}

#[test]
fn episode_grace_secs_default_range_and_stored_only_when_set() {
    let cases = [
        (None, Some(DEFAULT_EPISODE_GRACE_SECS)),
        (Some(1), Some(1)),
        (Some(86_400), Some(86_400)),
        (Some(0), None),
        (Some(86_401), None),
    ];
    for (given, want) in cases {
        let got = BudgetFile {
            episode_grace_secs: given,
            ..Default::default()
        }
        .validate()
        .ok()
        .map(|b| b.episode_grace_secs);
        assert_eq!(got, want, "{given:?}");
    }
    // A record stored before the key existed reads with the default, and a default
    // budget stores no new key.
    let stored = serde_json::to_value(Budget::default()).unwrap();
    assert!(stored.get("episode_grace_secs").is_none(), "{stored}");
    let read: Budget = serde_json::from_value(stored).unwrap();
    assert_eq!(read.episode_grace_secs, DEFAULT_EPISODE_GRACE_SECS);
}

#[test]
fn stagnation_rounds_default_range_and_off() {
    // (given, resolved or None when refused)
    let cases = [
        (None, Some(2)),
        (Some(0), Some(0)),
        (Some(5), Some(5)),
        (Some(1001), None),
    ];
    for (given, want) in cases {
        let got = BudgetFile {
            stagnation_rounds: given,
            ..Default::default()
        }
        .validate()
        .ok()
        .map(|b| b.stagnation_rounds);
        assert_eq!(got, want, "{given:?}");
    }
}

#[test]
fn self_checks_default_bounds_and_zero_table() {
    let with = |v: Option<u32>| BudgetFile {
        self_checks: v,
        ..Default::default()
    };
    let cases: Vec<(Option<u32>, Result<u32, &str>)> = vec![
        (None, Ok(DEFAULT_SELF_CHECKS)),
        (Some(0), Ok(0)),
        (Some(1), Ok(1)),
        (Some(MAX_SELF_CHECKS), Ok(MAX_SELF_CHECKS)),
        (Some(MAX_SELF_CHECKS + 1), Err("self_checks")),
    ];
    for (given, want) in cases {
        let got = with(given).validate().map(|b| b.self_checks);
        assert_eq!(
            got.map_err(|(key, _)| key),
            want.map_err(String::from),
            "{given:?}"
        );
    }
    // A resumed run keeps its value unless the new budget names the key.
    let base = with(Some(0)).validate().unwrap();
    assert_eq!(
        BudgetFile::default()
            .validate_over(&base)
            .unwrap()
            .self_checks,
        0
    );
    assert_eq!(with(Some(3)).validate_over(&base).unwrap().self_checks, 3);
    // The default is not stored; a record without the key reads as the default.
    let stored = serde_json::to_value(Budget::default()).unwrap();
    assert!(stored.get("self_checks").is_none(), "{stored}");
    let back: Budget = serde_json::from_value(stored).unwrap();
    assert_eq!(back.self_checks, DEFAULT_SELF_CHECKS);
    let zero = serde_json::to_value(&base).unwrap();
    assert_eq!(zero["self_checks"], 0);
}

#[test]
fn step_retries_default_bounds_zero_and_storage() {
    let with = |v: Option<u32>| BudgetFile {
        step_retries: v,
        ..Default::default()
    };
    let cases: Vec<(Option<u32>, Result<u32, &str>)> = vec![
        (None, Ok(DEFAULT_STEP_RETRIES)),
        (Some(0), Ok(0)),
        (Some(3), Ok(3)),
        (Some(MAX_STEP_RETRIES), Ok(MAX_STEP_RETRIES)),
        (Some(MAX_STEP_RETRIES + 1), Err("step_retries")),
    ];
    for (given, want) in cases {
        let got = with(given).validate().map(|b| b.step_retries);
        assert_eq!(
            got.map_err(|(key, _)| key),
            want.map_err(String::from),
            "{given:?}"
        );
    }
    // A resumed run keeps its value unless the new budget names the key.
    let base = with(Some(0)).validate().unwrap();
    let resumed = BudgetFile::default().validate_over(&base).unwrap();
    assert_eq!(resumed.step_retries, 0);
    // The default is not stored; a record stored before the key existed reads as the default.
    let stored = serde_json::to_value(Budget::default()).unwrap();
    assert!(stored.get("step_retries").is_none(), "{stored}");
    let back: Budget = serde_json::from_value(stored).unwrap();
    assert_eq!(back.step_retries, DEFAULT_STEP_RETRIES);
    assert_eq!(serde_json::to_value(&base).unwrap()["step_retries"], 0);
}

#[test]
fn rollback_regressions_defaults_on_and_is_stored_only_when_off() {
    let off = BudgetFile {
        rollback_regressions: Some(false),
        ..Default::default()
    }
    .validate()
    .unwrap();
    assert!(!off.rollback_regressions);
    assert!(
        BudgetFile::default()
            .validate()
            .unwrap()
            .rollback_regressions
    );
    // A resumed run keeps its value unless the new budget names the key.
    assert!(
        !BudgetFile::default()
            .validate_over(&off)
            .unwrap()
            .rollback_regressions
    );
    let stored = serde_json::to_value(Budget::default()).unwrap();
    assert!(stored.get("rollback_regressions").is_none(), "{stored}");
    let back: Budget = serde_json::from_value(stored).unwrap();
    assert!(back.rollback_regressions);
    assert_eq!(
        serde_json::to_value(&off).unwrap()["rollback_regressions"],
        false
    );
}

#[test]
fn clause_steps_and_manager_default_on_and_are_stored_only_when_off() {
    type Key = fn(&Budget) -> bool;
    type Set = fn(&mut BudgetFile);
    let keys: [(&str, Key, Set); 2] = [
        (
            "clause_steps",
            |b| b.clause_steps,
            |f| f.clause_steps = Some(false),
        ),
        ("manager", |b| b.manager, |f| f.manager = Some(false)),
    ];
    for (name, get, set_off) in keys {
        let mut file = BudgetFile::default();
        set_off(&mut file);
        let off = file.validate().unwrap();
        assert!(!get(&off), "{name}");
        assert!(get(&BudgetFile::default().validate().unwrap()), "{name}");
        // A resumed run keeps its value unless the new budget names the key.
        assert!(
            !get(&BudgetFile::default().validate_over(&off).unwrap()),
            "{name}"
        );
        let stored = serde_json::to_value(Budget::default()).unwrap();
        assert!(stored.get(name).is_none(), "{name}: {stored}");
        let back: Budget = serde_json::from_value(stored).unwrap();
        assert!(get(&back), "{name}");
        assert_eq!(serde_json::to_value(&off).unwrap()[name], false, "{name}");
    }
}

#[test]
fn attempts_default_bounds_resume_and_storage() {
    let with = |v: Option<u32>| BudgetFile {
        attempts: v,
        ..Default::default()
    };
    let cases: Vec<(Option<u32>, Result<u32, &str>)> = vec![
        (None, Ok(DEFAULT_ATTEMPTS)),
        (Some(1), Ok(1)),
        (Some(3), Ok(3)),
        (Some(MAX_ATTEMPTS), Ok(MAX_ATTEMPTS)),
        (Some(0), Err("attempts")),
        (Some(MAX_ATTEMPTS + 1), Err("attempts")),
    ];
    for (given, want) in cases {
        let got = with(given).validate().map(|b| b.attempts);
        assert_eq!(
            got.map_err(|(key, _)| key),
            want.map_err(String::from),
            "{given:?}"
        );
    }
    let (_, why) = with(Some(9)).validate().unwrap_err();
    assert_eq!(why, "must be between 1 and 8, got 9");
    // A resumed run keeps its value unless the new budget names the key.
    let base = with(Some(3)).validate().unwrap();
    assert_eq!(
        BudgetFile::default().validate_over(&base).unwrap().attempts,
        3
    );
    assert_eq!(with(Some(2)).validate_over(&base).unwrap().attempts, 2);
    // The default is not stored; a record stored before the key existed reads as one.
    let stored = serde_json::to_value(Budget::default()).unwrap();
    assert!(stored.get("attempts").is_none(), "{stored}");
    let back: Budget = serde_json::from_value(stored).unwrap();
    assert_eq!(back.attempts, 1);
    assert_eq!(serde_json::to_value(&base).unwrap()["attempts"], 3);
}

#[test]
fn goal_first_defaults_off_and_is_stored_only_when_on() {
    let on = BudgetFile {
        goal_first: Some(true),
        ..Default::default()
    }
    .validate()
    .unwrap();
    assert!(on.goal_first);
    assert!(!BudgetFile::default().validate().unwrap().goal_first);
    // A resumed run keeps its value unless the new budget names the key.
    assert!(BudgetFile::default().validate_over(&on).unwrap().goal_first);
    let stored = serde_json::to_value(Budget::default()).unwrap();
    assert!(stored.get("goal_first").is_none(), "{stored}");
    assert_eq!(serde_json::to_value(&on).unwrap()["goal_first"], true);
    let back: Budget = serde_json::from_value(serde_json::to_value(&on).unwrap()).unwrap();
    assert!(back.goal_first);
}
