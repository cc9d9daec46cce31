package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class MemorySizeTest {

    @ParameterizedTest
    @CsvSource({
        "8GB, 8589934592", "8G, 8589934592", "8GiB, 8589934592", "8 gib, 8589934592",
        "4096MB, 4294967296", "4096M, 4294967296", "4096, 4294967296", "4096MiB, 4294967296",
        "1.5GiB, 1610612736", "512B, 512", "2K, 2048", "1T, 1099511627776", "0, 0", "0.5M, 524288"})
    void parsesTheFormsUsersWrite(String text, long bytes) {
        assertThat(MemorySize.parse(text).bytes()).isEqualTo(bytes);
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "  ", "-1", "-8GB", "8XB", "GB", "8 G B", "1.5.2", "0.3B", "abc", "8e3", "1,5G",
        "99999999999999999999T", "9999999999T"})
    void rejectsGarbageNamingTheInputAndTheForms(String text) {
        assertThatThrownBy(() -> MemorySize.parse(text))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("memory size");
    }

    @Test
    void unknownUnitIsNamed() {
        assertThatThrownBy(() -> MemorySize.parse("8XB"))
                .hasMessageContaining("unknown unit \"XB\"").hasMessageContaining("\"4096MB\"");
    }

    @Test
    void overflowIsRejected() {
        assertThatThrownBy(() -> MemorySize.parse("9999999999T")).hasMessageContaining("too large");
        assertThatThrownBy(() -> MemorySize.ofGibibytes(Long.MAX_VALUE / 2)).isInstanceOf(ArithmeticException.class);
    }

    @Test
    void nullIsRejectedLikeBlank() {
        assertThatThrownBy(() -> MemorySize.parse(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("blank");
    }

    @Test
    void toStringUsesTheLargestExactUnit() {
        assertThat(MemorySize.ofGibibytes(8)).hasToString("8GiB");
        assertThat(MemorySize.ofMebibytes(1536)).hasToString("1536MiB");
        assertThat(MemorySize.ofBytes(1000)).hasToString("1000B");
        assertThat(MemorySize.ofBytes(2048)).hasToString("2KiB");
        assertThat(MemorySize.ZERO).hasToString("0B");
        assertThat(MemorySize.ofMebibytes(32 * 1024 + 512).toHumanString()).isEqualTo("32.5 GiB");
        assertThat(MemorySize.ofGibibytes(32).toHumanString()).isEqualTo("32 GiB");
    }

    @Test
    void arithmetic() {
        MemorySize a = MemorySize.ofGibibytes(4);
        assertThat(a.plus(a)).isEqualTo(MemorySize.ofGibibytes(8));
        assertThat(a.minusOrZero(MemorySize.ofGibibytes(5))).isEqualTo(MemorySize.ZERO);
        assertThat(a.isAtLeast(MemorySize.ofMebibytes(4096))).isTrue();
        assertThat(a.toMebibytes()).isEqualTo(4096);
        assertThatThrownBy(() -> MemorySize.ofBytes(-1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Property
    void toStringRoundTrips(@ForAll @LongRange(min = 0, max = Long.MAX_VALUE) long bytes) {
        MemorySize m = MemorySize.ofBytes(bytes);
        assertThat(MemorySize.parse(m.toString())).isEqualTo(m);
    }

    @Property
    void bareNumbersAreMebibytes(@ForAll @LongRange(min = 0, max = 1L << 40) long mib) {
        assertThat(MemorySize.parse(Long.toString(mib))).isEqualTo(MemorySize.ofMebibytes(mib));
    }

    @Property(tries = 2000)
    void garbageFailsOnlyWithIllegalArgument(@ForAll("garbage") String text) {
        try {
            MemorySize m = MemorySize.parse(text);
            assertThat(m.bytes()).isNotNegative();
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage()).isNotBlank();
        }
    }

    @Provide
    Arbitrary<String> garbage() {
        return Arbitraries.oneOf(
                Arbitraries.strings().ofMaxLength(20),
                Arbitraries.strings().withChars("0123456789.-+ eEkKmMgGtTiIbB").ofMaxLength(24));
    }
}
