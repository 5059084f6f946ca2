//! Which knowledge entries go into the prompt. All of them when they fit the budget;
//! otherwise the ones most relevant to the message by BM25 (k1 = 1.2, b = 0.75) over the
//! entries as documents, best first, until the budget is spent. Kept in the manifest's order
//! in the prompt, so the model reads them as the author wrote them.

use std::collections::{HashMap, HashSet};

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Lowercase words of letters and digits; very short words and a few stop words carry no signal.
pub fn terms(text: &str) -> Vec<String> {
    const STOP: &[&str] = &[
        "a", "an", "as", "at", "be", "by", "do", "if", "in", "is", "it", "me", "my", "no", "of", "on", "or", "so",
        "to", "up", "we", "the", "and", "for", "are", "was", "were", "what", "when", "where", "which", "who", "how",
        "with", "that", "this", "you", "your", "our", "can", "does", "did", "has", "have", "from", "into", "about",
        "there",
    ];
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

/// BM25 score of each entry for the query, in entry order.
pub fn bm25(entries: &[String], query: &str) -> Vec<f64> {
    let docs: Vec<Vec<String>> = entries.iter().map(|e| terms(e)).collect();
    let n = docs.len() as f64;
    let avg_len = (docs.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1.0)).max(1.0);
    let mut df: HashMap<&str, f64> = HashMap::new();
    for doc in &docs {
        for term in doc.iter().map(String::as_str).collect::<HashSet<_>>() {
            *df.entry(term).or_default() += 1.0;
        }
    }
    let query: HashSet<String> = terms(query).into_iter().collect();
    docs.iter()
        .map(|doc| {
            let len = doc.len() as f64;
            query
                .iter()
                .map(|q| {
                    let tf = doc.iter().filter(|t| *t == q).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = df.get(q.as_str()).copied().unwrap_or(0.0);
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len))
                })
                .sum()
        })
        .collect()
}

/// The entries to include within `budget_chars`, in their original order.
pub fn select(entries: &[String], query: &str, budget_chars: usize) -> Vec<String> {
    let total: usize = entries.iter().map(|e| e.chars().count()).sum();
    if total <= budget_chars {
        return entries.to_vec();
    }
    let scores = bm25(entries, query);
    let mut order: Vec<usize> = (0..entries.len()).filter(|&i| scores[i] > 0.0).collect();
    // Best first; ties keep the author's order.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut chosen = Vec::new();
    let mut used = 0;
    for i in order {
        let len = entries[i].chars().count();
        if used + len <= budget_chars {
            chosen.push(i);
            used += len;
        }
    }
    chosen.sort_unstable();
    chosen.into_iter().map(|i| entries[i].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kb() -> Vec<String> {
        [
            "The office opens at 9:00 and closes at 17:00 on weekdays.",
            "Parking is free in the garage under the building.",
            "Refunds are issued within 14 days of a return.",
            "The cafeteria serves lunch from 12:00 to 14:00.",
            "Support tickets are answered within one business day.",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn small_knowledge_goes_in_whole() {
        assert_eq!(select(&kb(), "anything", 10_000), kb());
    }

    #[test]
    fn the_relevant_entries_win_when_space_is_short() {
        let picked = select(&kb(), "When does the office open?", 70);
        assert_eq!(picked, vec![kb()[0].clone()]);
        let picked = select(&kb(), "how long do refunds take", 70);
        assert_eq!(picked, vec![kb()[2].clone()]);
        // Two relevant entries, in the author's order.
        let picked = select(&kb(), "lunch at the cafeteria and parking", 120);
        assert_eq!(picked, vec![kb()[1].clone(), kb()[3].clone()]);
    }

    #[test]
    fn nothing_relevant_means_nothing_included() {
        assert!(select(&kb(), "quantum chromodynamics", 50).is_empty());
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let entries: Vec<String> = vec!["apple banana".into(), "apple cherry".into(), "apple durian".into()];
        let scores = bm25(&entries, "apple cherry");
        assert!(scores[1] > scores[0] && scores[1] > scores[2], "{scores:?}");
        assert!((scores[0] - scores[2]).abs() < 1e-9);
    }
}
