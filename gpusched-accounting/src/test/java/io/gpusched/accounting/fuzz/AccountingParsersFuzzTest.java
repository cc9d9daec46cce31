package io.gpusched.accounting.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.gpusched.accounting.AccountingFormatException;
import io.gpusched.accounting.AccountingRecord;
import io.gpusched.accounting.RecordCodec;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;

/**
 * The accounting store's record parser under coverage-guided fuzzing: any line decodes to a record or throws
 * {@link AccountingFormatException}, nothing else; a record decoded encodes back to a line that decodes to the same
 * line again (the writer's format is the reader's). Inputs whose checksum does not match are refused before JSON is
 * read, so the target also checks lines it re-checksums itself (the first byte chooses). Without {@code JAZZER_FUZZ}
 * it runs over the committed inputs
 * ({@code src/test/resources/io/gpusched/accounting/fuzz/AccountingParsersFuzzTestInputs/recordLine/}).
 */
class AccountingParsersFuzzTest {

    @FuzzTest
    void recordLine(byte[] input) {
        String line = new String(input, StandardCharsets.UTF_8);
        if (!line.isEmpty() && (line.charAt(0) & 1) == 1 && line.length() > 10) {
            // reach the JSON checks: give the rest a valid checksum
            String json = line.substring(line.length() > 9 && line.charAt(8) == ' ' ? 9 : 1);
            line = String.format("%08x", crc(json)) + " " + json;
        }
        AccountingRecord r;
        try {
            r = RecordCodec.decode(line);
        } catch (AccountingFormatException e) {
            if (e.getMessage() == null || e.getMessage().isBlank()) {
                throw new AssertionError("refusal without a message");
            }
            return;
        }
        String again = RecordCodec.encode(r);
        AccountingRecord back = RecordCodec.decode(again);
        if (!RecordCodec.encode(back).equals(again)) {
            throw new AssertionError("round trip changed " + again + " into " + RecordCodec.encode(back));
        }
    }

    private static int crc(String json) {
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return (int) c.getValue();
    }
}
