/* langdetect's trial, n-gram rows and draws in C (corpus/langid.py has the why): every
   operation one IEEE double operation in langdetect's order. Compiled by corpus.native:
   cc -O2 -shared -fPIC -ffp-contract=off. */
#include <stddef.h>
#include <stdint.h>
long cf_langid_trial(const int32_t *rows, long available, long n_langs, double weight, const double *start,
                     double *prob, long limit, long every, double threshold,
                     const double *dense, long n_dense, const int64_t *single_lang, const double *single_prob) {
    for (long j = 0; j < n_langs; j++) prob[j] = start[j];
    for (long i = 0; ; i++) {
        if (i >= available) return -1;
        long r = rows[i];
        if (r < n_dense) {
            const double *row = dense + r * n_langs;
            for (long j = 0; j < n_langs; j++) prob[j] *= weight + row[j];
        } else {  /* known in one language: P = 0.0 in every other one */
            long only = (long)single_lang[r - n_dense];
            double alone = weight + 0.0, factor = weight + single_prob[r - n_dense];
            for (long j = 0; j < n_langs; j++) prob[j] *= j == only ? factor : alone;
        }
        if (i % every == 0) {
            double total = 0.0, largest = 0.0;
            for (long j = 0; j < n_langs; j++) total += prob[j];
            for (long j = 0; j < n_langs; j++) {
                double p = prob[j] / total;
                if (largest < p) largest = p;
                prob[j] = p;
            }
            if (largest > threshold || i >= limit) return i;
        }
    }
}

/* The row of a 2- or 3-gram key in the open-addressing table (``_lookup``: linear probing
   from the key's home slot until the key or an empty slot), or -1. */
static int32_t hashed_row(uint64_t key, const uint64_t *slots, long hash_bits, long row_bits) {
    uint64_t mask = ((uint64_t)1 << hash_bits) - 1, slot = (key * 0x9E3779B97F4A7C15ULL) >> (64 - hash_bits);
    for (;;) {
        uint64_t entry = slots[slot];
        if (entry == 0) return -1;
        if ((entry >> row_bits) == key) return (int32_t)(entry & (((uint64_t)1 << row_bits) - 1));
        slot = (slot + 1) & mask;
    }
}

/* The tables the n-grams are read from (``_code_tables``, the hash table), as ``_RowTables``. */
struct row_tables {
    const int64_t *code; const uint8_t *code_upper; const int32_t *unigram, *pairs, *triples;
    long codes, space; int32_t ask;
    const uint32_t *normalize; const uint16_t *letter; const int32_t *unigram_row; const uint64_t *slots;
    long hash_bits, row_bits, letter_bits, space_letter;
};

/* Every n-gram row of a BMP text, in langdetect's order (``_coded_ngram_rows``): at each
   character the rows of its 1-, 2- and 3-gram of codes from the code tables (a virtual
   space before the text: code ``space``, alphabet number ``space_letter``), nothing inside
   an all-capitals word; an n-gram the tables leave
   to the hash table (``ask``) is looked up by its characters' alphabet numbers (``letter``
   of the ``normalize``d character; a 1-gram in ``unigram_row``). Writes the rows to
   ``out`` (room for 3 * m) and returns how many. */
long cf_langid_coded_rows(const uint32_t *cps, long m, const struct row_tables *t, int32_t *out) {
    long before2 = t->space, before = t->space, count = 0, codes = t->codes;
    uint64_t letter2 = t->space_letter, letter1 = letter2, bits = t->letter_bits;
    for (long i = 0; i < m; i++) {
        long here = (long)t->code[cps[i]];
        uint64_t letter0 = t->letter[t->normalize[cps[i]]];
        if (!(t->code_upper[here] && t->code_upper[before])) {
            int32_t one = t->unigram[here], two = t->pairs[before * codes + here], three = t->triples[(before2 * codes + before) * codes + here];
            if (one == t->ask) one = t->unigram_row[t->normalize[cps[i]]];
            if (two == t->ask) two = hashed_row((letter1 << bits) | letter0, t->slots, t->hash_bits, t->row_bits);
            if (three == t->ask) three = hashed_row((letter2 << (2 * bits)) | (letter1 << bits) | letter0, t->slots, t->hash_bits, t->row_bits);
            if (one >= 0) out[count++] = one;
            if (two >= 0) out[count++] = two;
            if (three >= 0) out[count++] = three;
        }
        before2 = before;
        before = here;
        letter2 = letter1;
        letter1 = letter0;
    }
    return count;
}

/* What every detection's trials read, as ``_TrialTables``. */
struct trial_tables {
    long n_langs; const double *start; long limit, every; double threshold; long first_draws; double n_trial;
    const double *dense; long n_dense; const int64_t *single_lang; const double *single_prob;
};

/* One or two trials (``n_weights``) one after the other over a text's ``n`` n-gram rows, the
   first with ``first_weight``, the second with ``second_weight`` (a Gaussian pair), from
   word ``word`` of the seeded stream on: a draw is ``random.choice``'s (a word shifted
   right by ``shift``, taken when below ``n``), a trial is ``cf_langid_trial`` over the
   drawn rows (``first_draws`` of them, all ``limit + 1`` when the trial needs more),
   and each trial's vector / ``n_trial`` is added to ``total`` in turn. Returns the word
   after the last trial's last draw, or -1 when the ``n_words`` words ran out (``total``
   is then unchanged: the caller grows the stream and calls again). */
long cf_langid_trials(const int32_t *ngrams, long n, long shift, const uint32_t *words, long n_words, long word,
                      double first_weight, double second_weight, long n_weights, double *total, const struct trial_tables *t) {
    long n_langs = t->n_langs, limit = t->limit;
    int32_t rows[limit + 1];
    long at[limit + 1];
    double sums[n_langs], prob[n_langs];
    for (long j = 0; j < n_langs; j++) sums[j] = total[j];
    for (long k = 0; k < n_weights; k++) {
        long drawn = 0, want = t->first_draws < limit + 1 ? t->first_draws : limit + 1, last;
        for (;;) {
            while (drawn < want) {
                if (word >= n_words) return -1;
                uint32_t value = words[word] >> shift;
                if (value < (uint32_t)n) {
                    rows[drawn] = ngrams[value];
                    at[drawn++] = word;
                }
                word++;
            }
            last = cf_langid_trial(rows, drawn, n_langs, k ? second_weight : first_weight, t->start, prob, limit, t->every,
                                   t->threshold, t->dense, t->n_dense, t->single_lang, t->single_prob);
            if (last >= 0) break;
            want = limit + 1;
        }
        for (long j = 0; j < n_langs; j++) sums[j] += prob[j] / t->n_trial;
        word = at[last] + 1;
    }
    for (long j = 0; j < n_langs; j++) total[j] = sums[j];
    return word;
}
