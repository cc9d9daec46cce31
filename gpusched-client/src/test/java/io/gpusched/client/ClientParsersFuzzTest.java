package io.gpusched.client;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The client's answer parser under coverage-guided fuzzing (docs/FUZZING.md). Under {@code ./mvnw verify} the method
 * runs as a regression test over its committed inputs ({@code src/test/resources/io/gpusched/client/
 * ClientParsersFuzzTestInputs/answer/}: seeds and every finding kept); with {@code JAZZER_FUZZ=1} it fuzzes. In the
 * client's own package: the parser ({@link Answer}, {@link Replies}) is not public API.
 */
class ClientParsersFuzzTest {

    @FuzzTest
    void answer(byte[] input) {
        AnswerFuzzer.fuzzerTestOneInput(input);
    }
}
