"""Decision policy of the evaluate phase: what counts as adopt, reject, inconclusive, non-inferior,
below the floor, and which option the verdict keeps. Pure functions over the comparison layer's
numbers (campaign.evaluate.comparison); no statistics are computed here, no wording is made.

The contract other phases read (budget, index, report, tools/findings). Keys and columns are only
ever added; the ones marked NEW appeared with the crossed seed x item variance model.

decisions.json
  decide_on, metric, confidence, min_useful_effect, max_quality_loss, note  (as before)
  decisions: list, one per main effect and per quantized variant on the decide_on split:
    kind ("main" | "quantized"), subject, reference, decision, estimate, ci_low, ci_high,
    p_holm, n_seeds, words  (as before)
    adj_low, adj_high   NEW  the interval adjusted for the family (Bonferroni at alpha / m,
                             m = tests in the Holm family); adopt/reject read these
    dominant            NEW  "seeds" | "items" | null: which variance part is larger
    seeds_needed        NEW  int | null: seeds per cell that would decide it (null: seeds alone
                             cannot, or already decided)
    items_needed        NEW  int | null: evaluation items that would decide it
    Price is NOT computed here: evaluate does not read the projected hours (runs.tsv's hours are
    outside its keyed view). The budget phase prices seeds_needed x hours per run x offer.
  decision values:
    main effect / cell:  "adopt" (adjusted interval's lower end >= min_useful_effect),
                         "adopt (smaller than useful)" (adjusted interval above 0 but not clear
                         of min_useful_effect), "reject" (adjusted upper end < min_useful_effect),
                         "inconclusive", "inconclusive (one seed)"
    quantized:           "adopt" (non-inferior: Holm-adjusted one-sided p < (1-confidence)/2 on
                         H0: difference <= -max_quality_loss), "reject" (score interval's upper
                         end < -max_quality_loss), "inconclusive",
                         "inconclusive (too few items)" (no outcome on these items could show
                         the margin), "consistency check" (the fp32 copy of its own run: never
                         a decision, never a candidate)
    floor rows:          "below floor", "above floor", "not shown above floor"
  best_cell: cell, by_split, value, ci_low, ci_high, interval_over, runs  (as before: value and
    interval are on decide_on, where it was chosen)
    chosen_on           NEW  the split it was chosen on (= decide_on)
    reported_on         NEW  the other split; reported: {value, ci_low, ci_high} on it (the
                             headline number: no winner's curse)
    representative_run  NEW  the run of the median seed on decide_on (what to quantize)
  below_floor: list {cell, floor, verdict, estimate, ci_low, ci_high}  (as before)
  floor             NEW  {name, value, ci_low, ci_high} of the best floor on decide_on, or null
  verdict           NEW  {keep, kind ("cell" | "floor"), line, lines}: the option to keep; kind
                         "floor" when the chosen cell is below the best floor by the test;
                         summary.txt's first line is verdict.line
  no_decision_possible  NEW  list {subject, smallest_provable_loss, items_needed} for quantized
                         variants whose items cannot show max_quality_loss
  lines, skipped_variants  (as before)

comparisons.parquet (one row per comparison and split; as before: split, kind, subject,
reference, metric, n_seeds, estimate, ci_low, ci_high, p_value, p_holm, test, wilcoxon_p,
seed_sd, mde, seeds_needed, interval_over, decision, estimability, aliases)
  kinds: main, interaction, cell (against the control), quantized, floor  (as before)
  se              NEW  standard error of the estimate (crossed seed x item model)
  df              NEW  Satterthwaite degrees of freedom (inf: items only)
  var_seeds       NEW  the part of se^2 that more seeds shrink
  var_items       NEW  the part of se^2 that more items shrink
  adj_low, adj_high  NEW  family-adjusted interval (Bonferroni alpha / m)
  dominant, items_needed  NEW  as in decisions.json
  smallest_provable_loss  NEW  quantized rows: the loss bound zero discordant items would give
  mde             now: the smallest true effect adopted with probability `power` (interval
                  clearing min_useful_effect), in the metric's units
"""

from __future__ import annotations
