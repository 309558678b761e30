//! Crawler families, told apart by their user agents.

use std::cell::RefCell;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

/// A family of crawlers: the bots of one search engine, variants included
/// (Googlebot-Image, -News and -Video are Googlebot's), or `Other` for any
/// client that names none of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Family {
    Googlebot,
    Bingbot,
    Yandex,
    Applebot,
    DuckDuckBot,
    Baiduspider,
    PetalBot,
    SeznamBot,
    Naver,
    Other,
}

/// What each family's user agents hold (matched without regard to case),
/// and the family.
const TOKENS: &[(&str, Family)] = &[
    ("googlebot", Family::Googlebot),
    ("bingbot", Family::Bingbot),
    ("bingpreview", Family::Bingbot),
    ("adidxbot", Family::Bingbot),
    ("msnbot", Family::Bingbot),
    ("yandexbot", Family::Yandex),
    ("yandeximages", Family::Yandex),
    ("yandexnews", Family::Yandex),
    ("yandexvideo", Family::Yandex),
    ("applebot", Family::Applebot),
    ("duckduckbot", Family::DuckDuckBot),
    ("baiduspider", Family::Baiduspider),
    ("petalbot", Family::PetalBot),
    ("seznambot", Family::SeznamBot),
    ("yeti/", Family::Naver),
];

impl Family {
    /// Every family that can be verified, in the order views list them.
    pub(crate) const CRAWLERS: [Family; 9] = [
        Family::Googlebot,
        Family::Bingbot,
        Family::Yandex,
        Family::Applebot,
        Family::DuckDuckBot,
        Family::Baiduspider,
        Family::PetalBot,
        Family::SeznamBot,
        Family::Naver,
    ];

    /// The family a `User-Agent` names: the first of its tokens to appear.
    pub(crate) fn of_user_agent(user_agent: &[u8]) -> Family {
        thread_local! {
            /// The last `User-Agent` this thread matched and its family: a
            /// crawler sends the same one with every request, and matching
            /// it again was a twentieth of a `304`'s CPU.
            static LAST: RefCell<(Vec<u8>, Family)> = const { RefCell::new((Vec::new(), Family::Other)) };
        }
        LAST.with_borrow_mut(|(last, family)| {
            if last.as_slice() != user_agent {
                *family = Family::matched(user_agent);
                last.clear();
                last.extend_from_slice(user_agent);
            }
            *family
        })
    }

    fn matched(user_agent: &[u8]) -> Family {
        static MATCHER: OnceLock<AhoCorasick> = OnceLock::new();
        let matcher = MATCHER.get_or_init(|| {
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::LeftmostFirst)
                .build(TOKENS.iter().map(|(token, _)| token))
                .expect("a few literal tokens")
        });
        matcher
            .find(user_agent)
            .map_or(Family::Other, |found| TOKENS[found.pattern().as_usize()].1)
    }

    /// Its name in the ledger, the metrics and the ranges files
    /// (`crawler_ranges_dir/<name>.json`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Family::Googlebot => "googlebot",
            Family::Bingbot => "bingbot",
            Family::Yandex => "yandex",
            Family::Applebot => "applebot",
            Family::DuckDuckBot => "duckduckbot",
            Family::Baiduspider => "baiduspider",
            Family::PetalBot => "petalbot",
            Family::SeznamBot => "seznambot",
            Family::Naver => "naver",
            Family::Other => "other",
        }
    }

    pub(crate) fn named(name: &str) -> Option<Family> {
        Family::CRAWLERS
            .into_iter()
            .find(|family| family.name() == name)
    }

    /// The domains its hosts' reverse DNS names end in, as each engine
    /// documents them.
    pub(crate) fn dns_domains(self) -> &'static [&'static str] {
        match self {
            Family::Googlebot => &["googlebot.com", "google.com", "googleusercontent.com"],
            Family::Bingbot => &["search.msn.com"],
            Family::Yandex => &["yandex.ru", "yandex.net", "yandex.com"],
            Family::Applebot => &["applebot.apple.com"],
            Family::DuckDuckBot => &["duckduckgo.com"],
            Family::Baiduspider => &["baidu.com", "baidu.jp"],
            Family::PetalBot => &["petalsearch.com", "aspiegel.com"],
            Family::SeznamBot => &["seznam.cz"],
            Family::Naver => &["naver.com"],
            Family::Other => &[],
        }
    }
}

/// Who fetched, as the ledger counts it: a verified family, a client
/// that claims a family from an address not verified as the family's, or
/// anyone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Crawler {
    Verified(Family),
    Unverified,
    Other,
}

impl Crawler {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Crawler::Verified(family) => family.name(),
            Crawler::Unverified => "unverified",
            Crawler::Other => "other",
        }
    }

    pub(crate) fn is_verified(self) -> bool {
        matches!(self, Crawler::Verified(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_user_agents_name_their_family() {
        let cases = [
            (
                "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
                Family::Googlebot,
            ),
            (
                "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 \
                 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 \
                 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
                Family::Googlebot,
            ),
            ("Googlebot-Image/1.0", Family::Googlebot),
            ("Googlebot-News", Family::Googlebot),
            ("Googlebot-Video/1.0", Family::Googlebot),
            (
                "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
                Family::Bingbot,
            ),
            (
                "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
                Family::Yandex,
            ),
            (
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, \
                 like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; \
                 +http://www.apple.com/go/applebot)",
                Family::Applebot,
            ),
            (
                "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)",
                Family::DuckDuckBot,
            ),
            (
                "Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
                Family::Baiduspider,
            ),
            (
                "Mozilla/5.0 (compatible;PetalBot;+https://webmaster.petalsearch.com/site/petalbot)",
                Family::PetalBot,
            ),
            (
                "Mozilla/5.0 (compatible; SeznamBot/4.0; +https://o-seznam.cz/napoveda/vyhledavani/en/seznambot-crawler/)",
                Family::SeznamBot,
            ),
            (
                "Mozilla/5.0 (compatible; Yeti/1.1; +https://naver.me/spd)",
                Family::Naver,
            ),
            ("Scrapy/2.11.2 (+https://scrapy.org)", Family::Other),
            ("curl/8.5.0", Family::Other),
            ("", Family::Other),
        ];
        // Forth and back: each one after another, and again after itself.
        for (user_agent, family) in cases.iter().chain(cases.iter().rev()) {
            assert_eq!(
                Family::of_user_agent(user_agent.as_bytes()),
                *family,
                "{user_agent}"
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for family in Family::CRAWLERS {
            assert_eq!(Family::named(family.name()), Some(family));
        }
        assert_eq!(Family::named("other"), None);
    }
}
