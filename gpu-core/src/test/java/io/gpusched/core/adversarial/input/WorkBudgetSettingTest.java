package io.gpusched.core.adversarial.input;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code gpu.placement.work_budget} as a user writes it in YAML. Accepted: whole numbers >= 1,000 and
 * "exact"; everything else is a {@link GpuConfigException} naming the key and what is valid; the constructor refuses
 * budgets below 1,000 with {@link IllegalArgumentException}.
 */
@Tag("adversarial")
class WorkBudgetSettingTest {

    static GpuConfig parse(String value) {
        return GpuConfig.parse("gpu:\n  placement: {work_budget: " + value + "}\n", "review23.yaml");
    }

    @ParameterizedTest
    @ValueSource(strings = {"0", "999", "-1", "-1000", "99999999999999999999", "1.5e6", "'twelve'", "''",
        "'exact!'", "'0x3e8'", "'1000 units'", "'exactly'", "'1000.0'"})
    void refusedWithTheKeyNamed(String value) {
        GpuConfigException e = assertThrows(GpuConfigException.class, () -> parse(value), value);
        assertTrue(e.getMessage().contains("gpu.placement.work_budget"), value + ": " + e.getMessage());
        assertTrue(e.getMessage().contains("1000") || e.getMessage().contains("1,000"),
                "says what is valid: " + e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"1000", "2000000", "' 5000 '", "9223372036854775806"})
    void wholeNumbersFromAThousandAreTaken(String value) {
        long expected = Long.parseLong(value.replace("'", "").trim());
        assertEquals(expected, parse(value).workBudget(), value);
    }

    @ParameterizedTest
    @ValueSource(strings = {"exact", "EXACT", "' exact '"})
    void exactMeansNoBudget(String value) {
        assertEquals(TopologyAwareStrategy.EXACT, parse(value).workBudget(), value);
    }

    @ParameterizedTest
    @ValueSource(longs = {Long.MIN_VALUE, -1, 0, 999})
    void theConstructorRefusesBudgetsBelowAThousand(long budget) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new TopologyAwareStrategy(Objective.SET, budget));
        assertTrue(e.getMessage().contains(Long.toString(budget)), e.getMessage());
    }

    /**
     * Sibling keys refuse non-ASCII digits ({@code gpu.max_gpus_per_request: '１２'} and
     * {@code gpu.rate_limit.per_owner_per_second: '٣'} are GpuConfigExceptions); the budget takes them.
     */
    @ParameterizedTest
    @ValueSource(strings = {"'１０００'", "'١٠٠٠'", "'２０００００'"})
    void unicodeDigitsAreRefusedLikeEverySiblingKey(String value) {
        GpuConfigException e = assertThrows(GpuConfigException.class, () -> parse(value), value);
        assertTrue(e.getMessage().contains("gpu.placement.work_budget"), e.getMessage());
    }

    /** The refusal of a list names the key, but not what would be valid. */
    @Test
    void aListSaysWhatIsValid() {
        GpuConfigException e = assertThrows(GpuConfigException.class, () -> parse("[1000]"));
        assertTrue(e.getMessage().contains("gpu.placement.work_budget"), e.getMessage());
        assertTrue(e.getMessage().contains("1000") || e.getMessage().contains("exact"), e.getMessage());
    }
}
