package io.gpusched.accounting.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The accounting store's record parser under coverage-guided fuzzing ({@link RecordLineFuzzer}: a record or the
 * parser's one exception, and a round trip). Without {@code JAZZER_FUZZ} it runs over the committed inputs
 * ({@code src/test/resources/io/gpusched/accounting/fuzz/AccountingParsersFuzzTestInputs/recordLine/}).
 */
class AccountingParsersFuzzTest {

    @FuzzTest
    void recordLine(byte[] input) {
        RecordLineFuzzer.fuzzerTestOneInput(input);
    }
}
