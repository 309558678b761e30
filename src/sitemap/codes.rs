//! The ISO code lists the extensions are checked against: hreflang's
//! languages and regions, video restrictions' countries. The schema holds
//! the same lists (`sitemap_iso_languages()`, `sitemap_iso_countries()`), and
//! a test keeps the two equal.

/// ISO 639-1 language codes, lower case, sorted.
pub const LANGUAGES: [&str; 184] = [
    "aa", "ab", "ae", "af", "ak", "am", "an", "ar", "as", "av", "ay", "az", "ba", "be", "bg", "bh",
    "bi", "bm", "bn", "bo", "br", "bs", "ca", "ce", "ch", "co", "cr", "cs", "cu", "cv", "cy", "da",
    "de", "dv", "dz", "ee", "el", "en", "eo", "es", "et", "eu", "fa", "ff", "fi", "fj", "fo", "fr",
    "fy", "ga", "gd", "gl", "gn", "gu", "gv", "ha", "he", "hi", "ho", "hr", "ht", "hu", "hy", "hz",
    "ia", "id", "ie", "ig", "ii", "ik", "io", "is", "it", "iu", "ja", "jv", "ka", "kg", "ki", "kj",
    "kk", "kl", "km", "kn", "ko", "kr", "ks", "ku", "kv", "kw", "ky", "la", "lb", "lg", "li", "ln",
    "lo", "lt", "lu", "lv", "mg", "mh", "mi", "mk", "ml", "mn", "mr", "ms", "mt", "my", "na", "nb",
    "nd", "ne", "ng", "nl", "nn", "no", "nr", "nv", "ny", "oc", "oj", "om", "or", "os", "pa", "pi",
    "pl", "ps", "pt", "qu", "rm", "rn", "ro", "ru", "rw", "sa", "sc", "sd", "se", "sg", "si", "sk",
    "sl", "sm", "sn", "so", "sq", "sr", "ss", "st", "su", "sv", "sw", "ta", "te", "tg", "th", "ti",
    "tk", "tl", "tn", "to", "tr", "ts", "tt", "tw", "ty", "ug", "uk", "ur", "uz", "ve", "vi", "vo",
    "wa", "wo", "xh", "yi", "yo", "za", "zh", "zu",
];

/// ISO 3166-1 alpha-2 country codes, upper case, sorted.
pub(crate) const COUNTRIES: [&str; 249] = [
    "AD", "AE", "AF", "AG", "AI", "AL", "AM", "AO", "AQ", "AR", "AS", "AT", "AU", "AW", "AX", "AZ",
    "BA", "BB", "BD", "BE", "BF", "BG", "BH", "BI", "BJ", "BL", "BM", "BN", "BO", "BQ", "BR", "BS",
    "BT", "BV", "BW", "BY", "BZ", "CA", "CC", "CD", "CF", "CG", "CH", "CI", "CK", "CL", "CM", "CN",
    "CO", "CR", "CU", "CV", "CW", "CX", "CY", "CZ", "DE", "DJ", "DK", "DM", "DO", "DZ", "EC", "EE",
    "EG", "EH", "ER", "ES", "ET", "FI", "FJ", "FK", "FM", "FO", "FR", "GA", "GB", "GD", "GE", "GF",
    "GG", "GH", "GI", "GL", "GM", "GN", "GP", "GQ", "GR", "GS", "GT", "GU", "GW", "GY", "HK", "HM",
    "HN", "HR", "HT", "HU", "ID", "IE", "IL", "IM", "IN", "IO", "IQ", "IR", "IS", "IT", "JE", "JM",
    "JO", "JP", "KE", "KG", "KH", "KI", "KM", "KN", "KP", "KR", "KW", "KY", "KZ", "LA", "LB", "LC",
    "LI", "LK", "LR", "LS", "LT", "LU", "LV", "LY", "MA", "MC", "MD", "ME", "MF", "MG", "MH", "MK",
    "ML", "MM", "MN", "MO", "MP", "MQ", "MR", "MS", "MT", "MU", "MV", "MW", "MX", "MY", "MZ", "NA",
    "NC", "NE", "NF", "NG", "NI", "NL", "NO", "NP", "NR", "NU", "NZ", "OM", "PA", "PE", "PF", "PG",
    "PH", "PK", "PL", "PM", "PN", "PR", "PS", "PT", "PW", "PY", "QA", "RE", "RO", "RS", "RU", "RW",
    "SA", "SB", "SC", "SD", "SE", "SG", "SH", "SI", "SJ", "SK", "SL", "SM", "SN", "SO", "SR", "SS",
    "ST", "SV", "SX", "SY", "SZ", "TC", "TD", "TF", "TG", "TH", "TJ", "TK", "TL", "TM", "TN", "TO",
    "TR", "TT", "TV", "TW", "TZ", "UA", "UG", "UM", "US", "UY", "UZ", "VA", "VC", "VE", "VG", "VI",
    "VN", "VU", "WF", "WS", "YE", "YT", "ZA", "ZM", "ZW",
];

/// An ISO 639-1 language code (lower case).
pub(crate) fn is_language(code: &str) -> bool {
    LANGUAGES.binary_search(&code).is_ok()
}

/// An ISO 3166-1 alpha-2 country code (upper case).
pub(crate) fn is_country(code: &str) -> bool {
    COUNTRIES.binary_search(&code).is_ok()
}

/// An hreflang value: a language, optionally `-` and a region, or
/// `x-default`; matched case-insensitively, as crawlers do.
pub(crate) fn is_hreflang(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    if lower == "x-default" {
        return true;
    }
    match lower.split_once('-') {
        None => is_language(&lower),
        Some((language, region)) => {
            is_language(language) && is_country(&region.to_ascii_uppercase())
        }
    }
}

/// A Google News language: ISO 639 (two or three letters, lower case), or
/// `zh-cn` / `zh-tw`.
pub(crate) fn is_news_language(value: &str) -> bool {
    is_language(value)
        || (value.len() == 3 && value.bytes().all(|b| b.is_ascii_lowercase()))
        || matches!(value, "zh-cn" | "zh-tw")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_for_binary_search() {
        assert!(LANGUAGES.is_sorted());
        assert!(COUNTRIES.is_sorted());
    }

    #[test]
    fn hreflang_values() {
        for good in [
            "de",
            "de-AT",
            "DE-at",
            "x-default",
            "X-Default",
            "zh-TW",
            "en-GB",
        ] {
            assert!(is_hreflang(good), "{good}");
        }
        for bad in ["", "xx", "en-UK", "de-", "deu", "de-AT-x", "en_GB", "de-EU"] {
            assert!(!is_hreflang(bad), "{bad}");
        }
    }

    #[test]
    fn news_languages() {
        for good in ["en", "de", "fil", "zh-cn", "zh-tw"] {
            assert!(is_news_language(good), "{good}");
        }
        for bad in ["EN", "xx", "zh-hk", "e"] {
            assert!(!is_news_language(bad), "{bad}");
        }
    }
}
