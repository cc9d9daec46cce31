package io.gpusched.core;

import java.util.Locale;

/**
 * How good a placement is known to be, as the strategy that chose it can prove: {@link #optimal() proven optimal} for
 * its objective, {@link #within(double) within a bound} (the search ran out of its budget and returns its best set
 * with an upper bound on the optimum), or {@link #unrated() not rated} (a strategy that does not search, such as
 * packing, or an allocation this process learnt from another one's ledger record).
 *
 * @param rated          whether the strategy rated its choice at all
 * @param provenOptimal  whether the choice is proven optimal for the strategy's objective, tie-breaks included
 * @param withinPercent  how far below the optimum the choice's primary objective may be, in percent of the optimum's
 *                       upper bound (0 when proven optimal; meaningless when not rated)
 */
public record PlacementQuality(boolean rated, boolean provenOptimal, double withinPercent) {

    private static final PlacementQuality OPTIMAL = new PlacementQuality(true, true, 0);
    private static final PlacementQuality UNRATED = new PlacementQuality(false, false, 0);

    /** Checks the bound. */
    public PlacementQuality {
        if (!(withinPercent >= 0 && withinPercent <= 100)) {
            throw new IllegalArgumentException("withinPercent must be in [0, 100], was " + withinPercent);
        }
        if (provenOptimal && (withinPercent != 0 || !rated)) {
            throw new IllegalArgumentException("a proven optimal placement is rated and within 0 %");
        }
    }

    /** @return a choice proven optimal */
    public static PlacementQuality optimal() {
        return OPTIMAL;
    }

    /** @return a choice whose primary objective is at least {@code 100 - percent} % of the optimum's */
    public static PlacementQuality within(double percent) {
        return new PlacementQuality(true, false, percent);
    }

    /** @return a choice the strategy did not rate */
    public static PlacementQuality unrated() {
        return UNRATED;
    }

    /** @return "proven optimal", "within 1.25 % of optimal" or "not rated" */
    public String describe() {
        if (!rated) {
            return "not rated";
        }
        return provenOptimal ? "proven optimal"
                : String.format(Locale.ROOT, "within %.2f %% of optimal (search budget reached)", withinPercent);
    }
}
