//! Whether a site's robots.txt lets crawlers fetch its locs: sitemaps that
//! list URLs crawlers may not fetch lose their trust.
//!
//! The rules are RFC 9309's, as the `robotxt` crate reads and matches them:
//! a group per crawler, the longest matching rule wins, `Allow` wins a tie,
//! `*` and `$`, percent-encoding normalized on both sides. A loc is judged
//! for each checked agent, and disallowed when any of them is.
//!
//! Folds judge every row they place (a million a fold), so each distinct
//! group is parsed once, and a loc no rule can match is told apart with
//! one scan for the rules' literal pieces, without matching it rule by
//! rule: a rule matches only paths that contain the longest run of
//! literal characters of its pattern.

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use robotxt::Robots;
use serde::{Deserialize, Serialize};

/// The agents a site's locs are checked for when it does not say.
pub const DEFAULT_AGENTS: [&str; 3] = ["*", "googlebot", "bingbot"];

/// The most agents a site may check its locs for.
pub(crate) const MAX_AGENTS: usize = 16;

/// What happens to a loc the site's robots.txt disallows.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize, utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RobotsCheck {
    /// Left out of the sitemaps, with the reason `robots-disallowed`.
    #[default]
    LeaveOut,
    /// Listed, and reported as disallowed.
    Report,
    /// Not checked.
    Off,
}

impl RobotsCheck {
    /// As the schema stores it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RobotsCheck::LeaveOut => "leave-out",
            RobotsCheck::Report => "report",
            RobotsCheck::Off => "off",
        }
    }

    pub fn parse(text: &str) -> Option<RobotsCheck> {
        match text {
            "leave-out" => Some(RobotsCheck::LeaveOut),
            "report" => Some(RobotsCheck::Report),
            "off" => Some(RobotsCheck::Off),
            _ => None,
        }
    }
}

/// Why a robots.txt text cannot be served or judged by, if so: it is
/// binary (a control character other than tab, line feed or carriage
/// return). Its size is checked with the other settings.
pub(crate) fn robots_txt_problem(text: &str) -> Option<String> {
    let (line, column, byte) = text.lines().enumerate().find_map(|(n, line)| {
        line.bytes()
            .position(|b| (b.is_ascii_control() && b != b'\t' && b != b'\r') || b == 0x7f)
            .map(|at| (n + 1, at + 1, line.as_bytes()[at]))
    })?;
    Some(format!(
        "text, not binary: line {line}, column {column} holds the control character {byte:#04x}"
    ))
}

/// Why a list of agents cannot be checked for, if so.
pub(crate) fn agents_problem(agents: &[String]) -> Option<String> {
    if agents.is_empty() || agents.len() > MAX_AGENTS {
        return Some(format!("1 to {MAX_AGENTS} user agents"));
    }
    agents.iter().find_map(|agent| {
        let valid = agent == "*"
            || (!agent.is_empty()
                && agent.len() <= 64
                && agent
                    .bytes()
                    .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_'));
        (!valid).then(|| {
            format!(
                "user agents as robots.txt names them: `*`, or a product token of letters, - and _ \
                 (at most 64), not {agent:?}"
            )
        })
    })
}

/// A site's robots.txt, ready to judge its locs by.
pub(crate) struct RobotsJudge {
    groups: Vec<Group>,
}

/// The rules one or more of the checked agents follow.
struct Group {
    robots: Robots,
    /// The longest literal piece of every rule that can match only
    /// some paths; `None` when a rule matches every path.
    pieces: Option<AhoCorasick>,
}

impl RobotsJudge {
    /// The rules of `text` for each of `agents`, agents that follow the
    /// same group judged once.
    pub(crate) fn new(text: &str, agents: &[String]) -> RobotsJudge {
        let mut groups: Vec<Group> = Vec::new();
        for agent in agents {
            let robots = Robots::parse(text.as_bytes(), agent.as_str());
            if groups
                .iter()
                .any(|group| group.robots.rules() == robots.rules())
            {
                continue;
            }
            let pieces = robots
                .rules()
                .iter()
                .map(|rule| longest_literal(rule.pattern()))
                .collect::<Option<Vec<&str>>>()
                // A DFA: a third less time per loc than the default.
                .and_then(|pieces| {
                    AhoCorasick::builder()
                        .kind(Some(AhoCorasickKind::DFA))
                        .build(pieces)
                        .ok()
                });
            groups.push(Group { robots, pieces });
        }
        RobotsJudge { groups }
    }

    /// The rule that disallows `loc` for one of the agents, as
    /// `Disallow: PATTERN (User-agent: NAME)`; `None` when every agent may
    /// fetch it.
    pub(crate) fn disallowing_rule(&self, loc: &str) -> Option<String> {
        let path = path_and_query(loc);
        // A path with a percent sign or a byte the crate encodes is
        // normalized before matching: only a path already as the crate
        // would match it may be ruled out by its pieces.
        let plain = path.bytes().all(|b| {
            b.is_ascii_graphic() && !matches!(b, b'%' | b'"' | b'<' | b'>' | b'`' | b'{' | b'}')
        });
        self.groups.iter().find_map(|group| {
            if plain
                && let Some(pieces) = &group.pieces
                && !pieces.is_match(path)
            {
                return None;
            }
            group
                .robots
                .matching_rule(path)
                .filter(|rule| !rule.is_allow() && path != "/robots.txt")
                .map(|rule| {
                    format!(
                        "Disallow: {} (User-agent: {})",
                        rule.pattern(),
                        group.robots.user_agent()
                    )
                })
        })
    }
}

/// The longest run of characters of `pattern` that a path it matches must
/// contain; `None` when it matches every path.
fn longest_literal(pattern: &str) -> Option<&str> {
    let pattern = pattern.strip_suffix('$').unwrap_or(pattern);
    pattern
        .split('*')
        .max_by_key(|piece| piece.len())
        // Every path starts with `/`, so a pattern of `/` and stars
        // matches them all.
        .filter(|piece| !piece.is_empty() && *piece != "/")
}

/// The path and query of an absolute URL, as robots.txt rules match them:
/// `/` when it has no path, the fragment left out.
fn path_and_query(loc: &str) -> &str {
    let after_scheme = loc.find("://").map_or(0, |at| at + 3);
    let rest = &loc[after_scheme..];
    let Some(start) = rest.find(['/', '?', '#']) else {
        return "/";
    };
    let from_path = &rest[start..];
    let end = from_path.find('#').unwrap_or(from_path.len());
    match &from_path[..end] {
        "" => "/",
        path if path.starts_with('?') => {
            // `https://host?q` is `/?q`; the leading `/` is implied.
            &loc[after_scheme + start - 1..after_scheme + start + end]
        }
        path => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(text: &str) -> RobotsJudge {
        RobotsJudge::new(text, &DEFAULT_AGENTS.map(String::from))
    }

    fn allowed(judge: &RobotsJudge, path: &str) -> bool {
        judge
            .disallowing_rule(&format!("https://example.com{path}"))
            .is_none()
    }

    #[test]
    fn locs_are_matched_by_path_and_query() {
        assert_eq!(path_and_query("https://example.com/a/b?c=d#e"), "/a/b?c=d");
        assert_eq!(path_and_query("https://example.com"), "/");
        assert_eq!(path_and_query("https://example.com#top"), "/");
        assert_eq!(path_and_query("https://example.com:8080/x"), "/x");
    }

    /// RFC 9309, section 5.1 (simple example) and 2.2.2 (the `$`, `*` and
    /// percent-encoding tables).
    #[test]
    fn rfc_9309_examples() {
        let text = "User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\n\
                    User-Agent: foobot\nDisallow:/\nAllow:/example/page.html\n\
                    Allow:/example/allowed.gif\n\n\
                    User-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\n\
                    User-Agent: quxbot\n";
        let star = RobotsJudge::new(text, &["*".into()]);
        assert!(!allowed(&star, "/example/page.html"));
        assert!(!allowed(&star, "/images/dog.gif"));
        assert!(allowed(&star, "/images/dog.gif?size=1"));
        assert!(allowed(&star, "/publications/1"));
        let foobot = RobotsJudge::new(text, &["foobot".into()]);
        assert!(allowed(&foobot, "/example/page.html"));
        assert!(allowed(&foobot, "/example/allowed.gif"));
        assert!(!allowed(&foobot, "/example/other.html"));
        assert!(!allowed(&foobot, "/"));
        let bazbot = RobotsJudge::new(text, &["bazbot".into()]);
        assert!(!allowed(&bazbot, "/example/page.html"));
        assert!(allowed(&bazbot, "/example/other.html"));
        // An empty group allows everything.
        let quxbot = RobotsJudge::new(text, &["quxbot".into()]);
        assert!(allowed(&quxbot, "/example/page.html"));

        let encoded = judge(
            "User-agent: *\nDisallow: /foo/bar?baz=https://foo.bar\nDisallow: /foo/bar/ツ\nDisallow: /foo/bar/%62%61%7A\n",
        );
        assert!(!allowed(&encoded, "/foo/bar?baz=https://foo.bar"));
        assert!(!allowed(&encoded, "/foo/bar/%E3%83%84"));
        assert!(!allowed(&encoded, "/foo/bar/baz"));
        assert!(!allowed(&encoded, "/foo/bar/%62%61%7A"));
        assert!(allowed(&encoded, "/foo/bar/other"));
    }

    /// Google's robots.txt documentation, "URL matching based on path
    /// values" and "Order of precedence for rules".
    #[test]
    fn google_documentation_examples() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("/", &["/", "/fish", "/a/b?c"], &[]),
            ("/*", &["/", "/fish"], &[]),
            ("/$", &["/"], &["/fish", "/?a"]),
            (
                "/fish",
                &[
                    "/fish",
                    "/fish.html",
                    "/fish/salmon.html",
                    "/fishheads",
                    "/fishheads/yummy.html",
                    "/fish.php?id=anything",
                ],
                &["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"],
            ),
            (
                "/fish*",
                &["/fish", "/fish.html", "/fishheads/yummy.html"],
                &["/Fish.asp", "/catfish"],
            ),
            (
                "/fish/",
                &["/fish/", "/fish/?id=anything", "/fish/salmon.htm"],
                &["/fish", "/fish.html", "/animals/fish/", "/Fish/Salmon.asp"],
            ),
            (
                "/*.php",
                &[
                    "/index.php",
                    "/filename.php",
                    "/folder/filename.php",
                    "/folder/filename.php?parameters",
                    "/folder/any.php.file.html",
                    "/filename.php/",
                ],
                &["/", "/windows.PHP"],
            ),
            (
                "/*.php$",
                &["/filename.php", "/folder/filename.php"],
                &[
                    "/filename.php?parameters",
                    "/filename.php/",
                    "/filename.php5",
                    "/windows.PHP",
                ],
            ),
            (
                "/fish*.php",
                &["/fish.php", "/fishheads/catfish.php?parameters"],
                &["/Fish.PHP"],
            ),
        ];
        for (pattern, matched, unmatched) in cases {
            let judge = judge(&format!("User-agent: *\nDisallow: {pattern}\n"));
            for path in *matched {
                assert!(!allowed(&judge, path), "{pattern} should match {path}");
            }
            for path in *unmatched {
                assert!(allowed(&judge, path), "{pattern} should not match {path}");
            }
        }
        let precedence: &[(&str, &str, bool)] = &[
            ("allow: /p\ndisallow: /", "/page", true),
            ("allow: /folder\ndisallow: /folder", "/folder/page", true),
            ("allow: /page\ndisallow: /*.htm", "/page.htm", false),
            ("allow: /page\ndisallow: /*.ph", "/page.php5", true),
            ("allow: /$\ndisallow: /", "/", true),
            ("allow: /$\ndisallow: /", "/page.htm", false),
        ];
        for (rules, path, expected) in precedence {
            let judge = judge(&format!("User-agent: *\n{rules}\n"));
            assert_eq!(allowed(&judge, path), *expected, "{rules:?} on {path}");
        }
    }

    #[test]
    fn any_agent_disallowing_leaves_a_loc_out_and_names_its_rule() {
        let text = "User-agent: *\nDisallow: /cart/\n\nUser-agent: Googlebot\nDisallow: /drafts/\n";
        let judge = judge(text);
        assert_eq!(
            judge
                .disallowing_rule("https://shop.example/cart/1")
                .as_deref(),
            Some("Disallow: /cart/ (User-agent: *)")
        );
        // Googlebot follows its own group alone, where /cart/ is allowed;
        // `*` and bingbot do not.
        assert_eq!(
            judge
                .disallowing_rule("https://shop.example/drafts/2")
                .as_deref(),
            Some("Disallow: /drafts/ (User-agent: googlebot)")
        );
        assert_eq!(judge.disallowing_rule("https://shop.example/shoes"), None);
        let googlebot_only = RobotsJudge::new(text, &["googlebot".into()]);
        assert_eq!(
            googlebot_only.disallowing_rule("https://shop.example/cart/1"),
            None
        );
        // robots.txt itself is always allowed.
        assert!(allowed(
            &super::RobotsJudge::new("User-agent: *\nDisallow: /\n", &["*".into()]),
            "/robots.txt"
        ));
    }

    /// The pieces only spare matching: a judge with them agrees with the
    /// crate on every path, including ones normalized before matching.
    #[test]
    fn ruling_out_by_pieces_agrees_with_matching_every_rule() {
        let text = "User-agent: *\nDisallow: /private/\nDisallow: /*?sessionid=\nDisallow: /*.pdf$\n\
                    Allow: /private/open/\nDisallow: /a%2Fb\nDisallow: /%7Euser/\nDisallow: /caf%C3%A9\n";
        let judge = judge(text);
        let robots = Robots::parse(text.as_bytes(), "*");
        for path in [
            "/",
            "/private",
            "/private/",
            "/private/x",
            "/private/open/y",
            "/x?sessionid=1",
            "/doc.pdf",
            "/doc.pdf?x",
            "/a%2Fb",
            "/a/b",
            "/~user/x",
            "/%7euser/x",
            "/café",
            "/caf%c3%a9",
            "/caf%C3%A9/menu",
            "/robots.txt",
            "/P%72ivate/x",
        ] {
            let crate_says = robots.is_allowed(path);
            assert_eq!(allowed(&judge, path), crate_says, "{path}");
        }
    }

    #[test]
    fn binary_text_and_bad_agents_are_named() {
        assert_eq!(
            robots_txt_problem("User-agent: *\r\n\tDisallow: /x\n"),
            None
        );
        assert_eq!(
            robots_txt_problem("User-agent: *\nDis\u{1}allow: /\n").as_deref(),
            Some("text, not binary: line 2, column 4 holds the control character 0x01")
        );
        assert_eq!(agents_problem(&["*".into(), "Googlebot-News".into()]), None);
        assert!(agents_problem(&[]).is_some());
        assert!(
            agents_problem(&["Googlebot/2.1".into()])
                .is_some_and(|problem| problem.contains("Googlebot/2.1"))
        );
    }
}
