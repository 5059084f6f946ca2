//! Which knowledge entries go into the prompt. All of them when they fit the budget;
//! otherwise the ones most relevant to the message, best first, until the budget is spent.
//! Relevance is by words, BM25 (k1 = 1.2, b = 0.75) over the entries as documents, and, when
//! the embedding model is there, mostly by meaning: 0.85 × the cosine of the entry's vector
//! and the message's + 0.15 × its BM25 scaled to the best match, so a word in common breaks
//! near ties of meaning (BENCHMARKS.md has the measurements behind the weights). Chosen
//! entries are kept in the manifest's order in the prompt, so the model reads them as the
//! author wrote them.

use std::collections::{HashMap, HashSet};

use sha2::{Digest, Sha256};

use super::Services;
use crate::llm::LlmError;
use crate::llm::embed::cosine;

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Characters of knowledge put in a chat's system prompt at most (about 1,000 tokens).
pub const BUDGET_CHARS: usize = 4_000;
/// The weight of meaning in the fused score; words weigh the rest.
const MEANING_WEIGHT: f64 = 0.85;
/// The cosine from which an entry sharing no word with the message counts as related.
pub const MIN_COSINE: f32 = 0.2;
/// Entries embedded in one call of the model.
const EMBED_BATCH: usize = 32;
/// The longest a chat waits for the embedding model before ranking by words alone.
const CHAT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

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

/// One entry's relevance to a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    pub index: usize,
    /// Its BM25 score (0: no word in common).
    pub words: f64,
    /// Its cosine with the message, when entries are embedded.
    pub meaning: Option<f32>,
    /// The fused score it is ranked by.
    pub score: f64,
}

/// The entries related to the query by words (BM25 above 0) or by meaning (cosine at least
/// `MIN_COSINE`; `meaning` holds each entry's, in entry order), best first; ties keep the
/// author's order.
pub fn rank(entries: &[String], query: &str, meaning: Option<&[f32]>) -> Vec<Ranked> {
    let words = bm25(entries, query);
    let best_words = words.iter().copied().fold(0.0, f64::max);
    let mut ranked: Vec<Ranked> = (0..entries.len())
        .filter_map(|i| {
            let cosine = meaning.and_then(|c| c.get(i).copied());
            let related = words[i] > 0.0 || cosine.is_some_and(|c| c >= MIN_COSINE);
            let score = match cosine {
                Some(c) => {
                    let scaled = if best_words > 0.0 { words[i] / best_words } else { 0.0 };
                    MEANING_WEIGHT * f64::from(c) + (1.0 - MEANING_WEIGHT) * scaled
                }
                None => words[i],
            };
            related.then_some(Ranked {
                index: i,
                words: words[i],
                meaning: cosine,
                score,
            })
        })
        .collect();
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    ranked
}

/// The entries to include within `budget_chars`, in their original order: all when they
/// fit, else the best ranked that fit.
pub fn choose(entries: &[String], query: &str, meaning: Option<&[f32]>, budget_chars: usize) -> Vec<String> {
    if fits(entries, budget_chars) {
        return entries.to_vec();
    }
    let mut chosen = Vec::new();
    let mut used = 0;
    for ranked in rank(entries, query, meaning) {
        let len = entries[ranked.index].chars().count();
        if used + len <= budget_chars {
            chosen.push(ranked.index);
            used += len;
        }
    }
    chosen.sort_unstable();
    chosen.into_iter().map(|i| entries[i].clone()).collect()
}

fn fits(entries: &[String], budget_chars: usize) -> bool {
    entries.iter().map(|e| e.chars().count()).sum::<usize>() <= budget_chars
}

/// The key an entry's vector is kept under.
fn hash(entry: &str) -> String {
    hex::encode(Sha256::digest(entry.as_bytes()))
}

/// The entries' hashes, in entry order, and the vectors `model` has kept of them.
async fn kept(
    services: &Services,
    model: &str,
    entries: &[String],
) -> Result<(Vec<String>, HashMap<String, Vec<f32>>), LlmError> {
    let hashes: Vec<String> = entries.iter().map(|e| hash(e)).collect();
    let kept = services
        .store
        .knowledge_vectors(model, hashes.clone())
        .await
        .map_err(|e| LlmError::Unreachable(format!("the kept vectors could not be read: {e}")))?;
    Ok((hashes, kept))
}

/// The entries' vectors, in entry order: those kept, and the rest embedded now and kept.
/// `None` without an embedding model.
pub async fn vectors(services: &Services, entries: &[String]) -> Result<Option<Vec<Vec<f32>>>, LlmError> {
    let Some(embedder) = &services.embedder else {
        return Ok(None);
    };
    let (hashes, mut kept) = kept(services, embedder.model(), entries).await?;
    let missing: Vec<usize> = (0..entries.len()).filter(|&i| !kept.contains_key(&hashes[i])).collect();
    // A few at a time, so that chats waiting for the model get their turns in between.
    for batch in missing.chunks(EMBED_BATCH) {
        let made = embedder
            .embed(batch.iter().map(|&i| entries[i].clone()).collect())
            .await?;
        let new: Vec<(String, Vec<f32>)> = batch.iter().map(|&i| hashes[i].clone()).zip(made).collect();
        if let Err(err) = services
            .store
            .put_knowledge_vectors(embedder.model(), new.clone())
            .await
        {
            tracing::warn!(error = %err, "could not keep knowledge vectors");
        }
        kept.extend(new);
    }
    Ok(Some(
        hashes.iter().map(|h| kept.remove(h).unwrap_or_default()).collect(),
    ))
}

/// Embeds the entries a chat would rank (those that do not all fit the prompt) when an
/// agent is applied, and keeps their vectors: the entries not kept yet count against the
/// account's embedding budget (`account_embeddings_per_*`), shared by every agent of the
/// account. Past it, or when the model fails, the agent's chats rank by words alone until
/// an apply within the budget embeds them.
pub async fn prepare(services: &Services, account_id: &str, entries: &[String]) {
    if fits(entries, BUDGET_CHARS) || services.embedder.is_none() {
        return;
    }
    match missing(services, entries).await {
        Ok(0) => return,
        Ok(n) => {
            let llm = &services.settings.llm;
            let limits = crate::domain::RateLimits {
                per_minute: llm.account_embeddings_per_minute,
                per_day: llm.account_embeddings_per_day,
            };
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            let counted = services
                .budgets
                .check_n(&format!("embeddings:{account_id}"), limits, crate::clock::now_ms(), n)
                .await;
            match counted {
                Ok(decision) if decision.allowed => {}
                Ok(_) => {
                    crate::telemetry::metrics::note_rate_limited("embeddings");
                    tracing::warn!(
                        account = account_id,
                        entries = n,
                        "knowledge not embedded: the account's embedding budget is spent; its chats rank by words"
                    );
                    return;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "the embedding budget could not be checked");
                    return;
                }
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, "the kept vectors could not be read");
            return;
        }
    }
    if let Err(err) = vectors(services, entries).await {
        tracing::warn!(error = %err, "the knowledge could not be embedded; its chats rank by words");
    }
}

/// A server's applies embed their agents' knowledge in the background, a second after the
/// agent's last apply (so an author applying again and again costs one embedding), one
/// agent at a time per host; the CLI's embed before they return.
#[derive(Default)]
pub struct Embedding {
    background: std::sync::atomic::AtomicBool,
    /// Agents whose knowledge is waiting to be embedded (the task reads their latest).
    waiting: std::sync::Mutex<HashSet<String>>,
    /// One agent's entries embedded at a time, so one account's applies queue behind each
    /// other and the chats' own questions get the model between their batches.
    turn: tokio::sync::Mutex<()>,
}

/// How long after an agent's last apply its knowledge is embedded.
const DEBOUNCE: std::time::Duration = std::time::Duration::from_secs(1);

impl Embedding {
    /// From now on, applies embed in the background (a server's).
    pub fn in_background(&self) {
        self.background.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Embeds the knowledge of the agent just applied: now, or (on a server) soon, once.
pub async fn prepare_applied(services: &Services, agent_id: &str, account_id: &str, entries: &[String]) {
    let embedding = &services.embedding;
    if !embedding.background.load(std::sync::atomic::Ordering::Relaxed) {
        return prepare(services, account_id, entries).await;
    }
    if fits(entries, BUDGET_CHARS) || services.embedder.is_none() {
        return;
    }
    let newly = embedding
        .waiting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(agent_id.to_string());
    if !newly {
        return;
    }
    let (services, agent_id, account_id) = (services.clone(), agent_id.to_string(), account_id.to_string());
    let lifecycle = services.lifecycle.clone();
    lifecycle.spawn(async move {
        tokio::time::sleep(DEBOUNCE).await;
        let _turn = services.embedding.turn.lock().await;
        services
            .embedding
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&agent_id);
        match services.store.agent(&agent_id).await {
            Ok(Some(agent)) => prepare(&services, &account_id, &agent.def.knowledge).await,
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(error = %err, agent = %agent_id, "could not read an agent to embed its knowledge")
            }
        }
    });
}

/// How many of the entries have no vector kept yet.
async fn missing(services: &Services, entries: &[String]) -> Result<usize, LlmError> {
    let Some(embedder) = &services.embedder else {
        return Ok(0);
    };
    let (hashes, kept) = kept(services, embedder.model(), entries).await?;
    Ok(hashes.iter().filter(|h| !kept.contains_key(*h)).count())
}

/// Deletes the kept vectors of entries no agent has any more, once older than `before`
/// (ms): one kept since may belong to an apply in progress. How many went.
pub async fn collect_vectors(services: &Services, before: i64) -> Result<usize, crate::store::StoreError> {
    services.store.delete_unused_knowledge_vectors(before, hash).await
}

/// Each entry's cosine with `query`, when every entry has its vector kept (an apply made
/// them, within the account's budget): a chat never embeds knowledge itself, only its
/// message. A failure of the model is logged and leaves words alone to rank by.
pub async fn cosines(services: &Services, entries: &[String], query: &str) -> Option<Vec<f32>> {
    let embedder = services.embedder.as_ref()?;
    let embedded = async {
        let (hashes, kept) = kept(services, embedder.model(), entries).await?;
        let Some(vectors) = hashes.iter().map(|h| kept.get(h)).collect::<Option<Vec<_>>>() else {
            // Not embedded (its apply found the budget spent, or the model failing).
            return Ok(None);
        };
        let asked = embedder.embed(vec![query.to_string()]).await?.pop().unwrap_or_default();
        Ok::<_, LlmError>(Some(vectors.iter().map(|v| cosine(v, &asked)).collect()))
    };
    match tokio::time::timeout(CHAT_WAIT, embedded).await {
        Ok(Ok(cosines)) => cosines,
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "knowledge ranked by words alone: the embedding model failed");
            None
        }
        Err(_) => {
            tracing::warn!("knowledge ranked by words alone: the embedding model was busy");
            None
        }
    }
}

/// The entries for a message's prompt (see `choose`); the model is asked only when they do
/// not all fit.
pub async fn relevant(services: &Services, entries: &[String], message: &str, budget_chars: usize) -> Vec<String> {
    if fits(entries, budget_chars) {
        return entries.to_vec();
    }
    let meaning = cosines(services, entries, message).await;
    choose(entries, message, meaning.as_deref(), budget_chars)
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

    fn select(entries: &[String], query: &str, budget: usize) -> Vec<String> {
        choose(entries, query, None, budget)
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
    fn meaning_finds_what_shares_no_word_and_words_break_near_ties() {
        // "When can I come in?" shares no word with the opening hours.
        let query = "When can I come in? Is there lunch?";
        assert!(bm25(&kb(), query)[0] == 0.0);
        let cosines = [0.62, 0.10, 0.05, 0.50, 0.20];
        let ranked = rank(&kb(), query, Some(&cosines));
        let order: Vec<usize> = ranked.iter().map(|r| r.index).collect();
        // Lunch: related by both (first, though less by meaning); opening hours: by
        // meaning alone; the rest below the cosine that counts.
        assert_eq!(order, [3, 0, 4]);
        assert_eq!(ranked[1].meaning, Some(0.62));
        assert_eq!(ranked[1].words, 0.0);
        let alone = [0.62, 0.10, 0.05, 0.15, 0.15];
        assert_eq!(
            choose(&kb(), "When can I come in?", Some(&alone), 70),
            vec![kb()[0].clone()]
        );
        // Without vectors, words alone: only the lunch entry.
        assert_eq!(
            rank(&kb(), query, None).iter().map(|r| r.index).collect::<Vec<_>>(),
            [3]
        );
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let entries: Vec<String> = vec!["apple banana".into(), "apple cherry".into(), "apple durian".into()];
        let scores = bm25(&entries, "apple cherry");
        assert!(scores[1] > scores[0] && scores[1] > scores[2], "{scores:?}");
        assert!((scores[0] - scores[2]).abs() < 1e-9);
    }
}
