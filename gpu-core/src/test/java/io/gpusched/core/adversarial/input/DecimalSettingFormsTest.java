package io.gpusched.core.adversarial.input;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The decimal setting {@code gpu.rate_limit.per_owner_per_second} against the rule YamlNumberAndTextFormsTest states
 * for configuration numbers (issue 36, rough edges: "max_gpus_per_request: 010 is read as octal 8"; "one rule
 * everywhere"): "A number is a number only in plain decimal; any other form is refused where a number is meant
 * (naming the key and saying why)". The value reaches {@link Double#parseDouble}, which also reads Java's own forms:
 * {@code 010} (YAML 1.1 octal 8) as ten, a hexadecimal float {@code 0x1p4} as 16, and {@code 10d} / {@code 10f}
 * (Java type suffixes) as ten.
 */
@Tag("adversarial")
class DecimalSettingFormsTest {

    @ParameterizedTest
    @ValueSource(strings = {"010", "0x1p4", "10d", "10f", "\"10\\t\""})
    void aRateInAnotherFormThanPlainDecimalIsRefusedNamingIt(String v) {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  rate_limit: {per_owner_per_second: " + v + ", burst: 3}\n",
                "g.yaml"))
                .as("per_owner_per_second: " + v)
                .isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("per_owner_per_second");
    }
}
