//! Keeping secrets out of everything loopgate writes down (logs, spans and their attributes,
//! the run log, events, API answers): a URL loses its password (or a bare user token) and the
//! values of credential-like query parameters; free text loses the URLs it quotes (error
//! messages do: `error sending request for url (http://user:pw@host/...)`) and any secret value
//! the caller knows. Pure functions; every place that logs a URL or an error that may quote one
//! goes through them.

/// What replaces a secret. Valid inside a URL's userinfo and query, so a redacted URL still
/// parses.
pub const REDACTED: &str = "***";

/// Secrets shorter than this are not searched for in text: replacing every `e` of a message
/// would destroy it without protecting anything worth protecting.
pub const MIN_SECRET_LEN: usize = 6;

/// Query parameter names (lowercase) whose values are credentials.
const SECRET_QUERY_KEYS: &[&str] = &[
    "key",
    "api_key",
    "apikey",
    "api-key",
    "x-api-key",
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth",
    "authorization",
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "client_secret",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "code",
];

fn is_secret_query_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_QUERY_KEYS.contains(&key.as_str())
}

/// `url` with its credentials replaced by [`REDACTED`]: `user:password@` keeps the user,
/// a userinfo without `:` (a token, as in `nats://TOKEN@host`) goes whole, and so does the
/// value of every credential-like query parameter (`?key=`, `api_key`, `token`, `sig`, ...).
/// Text that is not `scheme://...` comes back unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest_start = scheme_end + 3;
    let rest = &url[rest_start..];
    let authority_len = authority_len(rest);
    let authority = &rest[..authority_len];
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..rest_start]);
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.split_once(':') {
                Some((user, _password)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(REDACTED);
                }
                None => out.push_str(REDACTED),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let tail = &rest[authority_len..];
    let (before_fragment, fragment) = match tail.find('#') {
        Some(hash) => tail.split_at(hash),
        None => (tail, ""),
    };
    match before_fragment.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if is_secret_query_key(key) => format!("{key}={REDACTED}"),
                    _ => pair.to_string(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
        }
        None => out.push_str(before_fragment),
    }
    out.push_str(fragment);
    out
}

/// The length of the authority (`[userinfo@]host[:port]`) at the start of `rest` (the URL
/// after `://`). A password written into a URL unescaped may hold `/`, `?`, `#` and `@`, which
/// would otherwise end the authority inside the password and leave its tail in view. So when
/// a `user:` prefix comes before the first `/`, `?` or `#` and the text up to that delimiter
/// is not `host:port`, the userinfo runs to the LAST `@` of the URL and the authority to the
/// first delimiter after it. A path or query holding `@` behind such a userinfo is taken as
/// part of it: over-redaction, never a leak.
fn authority_len(rest: &str) -> usize {
    let naive = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(colon) = rest[..naive].find(':') else {
        return naive;
    };
    let port = &rest[colon + 1..naive];
    let host_and_port = colon > 0
        && !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && !rest[..naive].contains('@');
    if host_and_port || naive == rest.len() {
        return naive;
    }
    match rest.rfind('@') {
        Some(at) if at > colon => at + rest[at..].find(['/', '?', '#']).unwrap_or(rest.len() - at),
        _ => naive,
    }
}

/// Characters that may start a URL scheme's run backwards from `://`.
fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')
}

/// Characters that end a URL quoted in prose.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')' | ']' | '}' | ',')
}

/// `text` with every `scheme://...` URL in it passed through [`redact_url`].
pub fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search_from = 0;
    while let Some(found) = text[search_from..].find("://") {
        let sep = search_from + found;
        let start = text[..sep]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_scheme_char(*c))
            .last()
            .map_or(sep, |(i, _)| i);
        let end = text[sep + 3..]
            .char_indices()
            .find(|(_, c)| ends_url(*c))
            .map_or(text.len(), |(i, _)| sep + 3 + i);
        if start < sep {
            out.push_str(&text[copied..start]);
            out.push_str(&redact_url(&text[start..end]));
            copied = end;
        }
        search_from = end.max(sep + 3);
    }
    out.push_str(&text[copied..]);
    out
}

/// `text` with every occurrence of each known secret (at least [`MIN_SECRET_LEN`] long)
/// replaced by [`REDACTED`], and its URLs redacted ([`redact_urls_in`]).
pub fn redact_text(text: &str, secrets: &[&str]) -> String {
    let mut out = redact_urls_in(text);
    for secret in secrets {
        if secret.len() >= MIN_SECRET_LEN && out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_table() {
        let cases = [
            // (input, redacted)
            ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
            (
                "nats://executor:s3cret-pw@nats:4222",
                "nats://executor:***@nats:4222",
            ),
            ("nats://T0KEN@nats:4222", "nats://***@nats:4222"),
            ("redis://:hunter2@redis:6379/0", "redis://:***@redis:6379/0"),
            (
                "redis://default:p%40ss@10.0.0.1:6379",
                "redis://default:***@10.0.0.1:6379",
            ),
            (
                "rediss://user:pw@h:6380/2?protocol=resp3",
                "rediss://user:***@h:6380/2?protocol=resp3",
            ),
            ("https://api.example.com/v1", "https://api.example.com/v1"),
            (
                "https://gen.example.com/v1beta?key=AIzaSECRET&alt=sse",
                "https://gen.example.com/v1beta?key=***&alt=sse",
            ),
            (
                "https://h/v1?API_KEY=abc&Token=def&model=m#frag",
                "https://h/v1?API_KEY=***&Token=***&model=m#frag",
            ),
            ("https://u:p@h?sig=x", "https://u:***@h?sig=***"),
            ("https://h/a@b/c", "https://h/a@b/c"),
            ("not a url", "not a url"),
            ("", ""),
            ("https://h?flag", "https://h?flag"),
            // Passwords written unescaped: `#`, `/`, `?` and `@` stay inside the userinfo.
            ("redis://:p#a/s@word@host", "redis://:***@host"),
            (
                "redis://:p#a/s@word@host:6379/0",
                "redis://:***@host:6379/0",
            ),
            ("nats://user:p@ss@host", "nats://user:***@host"),
            ("nats://user:p@ss@host:4222", "nats://user:***@host:4222"),
            (
                "redis://default:pa/ss@redis:6379/0",
                "redis://default:***@redis:6379/0",
            ),
            (
                "redis://:p?w#d@r:1?protocol=resp3",
                "redis://:***@r:1?protocol=resp3",
            ),
            ("rediss://u:a#b@h", "rediss://u:***@h"),
            // host:port with an `@` further on stays a URL, not a password.
            ("https://h:8080/a@b/c", "https://h:8080/a@b/c"),
            (
                "https://h:443/path?email=a@b",
                "https://h:443/path?email=a@b",
            ),
            ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
            ("https://h/x:y@z", "https://h/x:y@z"),
        ];
        for (input, want) in cases {
            assert_eq!(redact_url(input), want, "{input}");
        }
    }

    #[test]
    fn urls_in_text_table() {
        let cases = [
            (
                "error sending request for url (http://u:pw@127.0.0.1:9/v1/chat/completions)",
                "error sending request for url (http://u:***@127.0.0.1:9/v1/chat/completions)",
            ),
            (
                "tried nats://a:b@h1:1, nats://c:d@h2:2 and redis://:e@h3",
                "tried nats://a:***@h1:1, nats://c:***@h2:2 and redis://:***@h3",
            ),
            ("no urls here: a://", "no urls here: a://"),
            ("://bare", "://bare"),
            ("\"https://h?key=k\"", "\"https://h?key=***\""),
            (
                "connecting to redis://:p#a/s@word@host:6379 failed",
                "connecting to redis://:***@host:6379 failed",
            ),
            (
                "nats://user:p@ss@host: authorization violation",
                "nats://user:***@host: authorization violation",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact_urls_in(input), want, "{input}");
        }
    }

    #[test]
    fn known_secrets_table() {
        let cases: [(&str, &[&str], &str); 5] = [
            (
                "401: invalid key sk-live-123456",
                &["sk-live-123456"],
                "401: invalid key ***",
            ),
            ("short e stays", &["e"], "short e stays"),
            ("twice: abcdef abcdef", &["abcdef", ""], "twice: *** ***"),
            (
                "url and key: https://h?key=zzzzzz pw=qqqqqq",
                &["qqqqqq"],
                "url and key: https://h?key=*** pw=***",
            ),
            ("nothing", &[], "nothing"),
        ];
        for (input, secrets, want) in cases {
            assert_eq!(redact_text(input, secrets), want, "{input}");
        }
    }
}
