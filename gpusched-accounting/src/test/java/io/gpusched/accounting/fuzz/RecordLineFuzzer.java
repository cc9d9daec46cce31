package io.gpusched.accounting.fuzz;

import io.gpusched.accounting.AccountingFormatException;
import io.gpusched.accounting.AccountingRecord;
import io.gpusched.accounting.JacksonRecordEncoding;
import io.gpusched.accounting.RecordCodec;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;

/**
 * Fuzz target for {@link RecordCodec#decode(String)} (a line of the accounting store), for the JUnit regression run
 * ({@link AccountingParsersFuzzTest}) and the standalone campaign ({@code .ci/fuzz recordLine}): any line decodes to a
 * record or throws {@link AccountingFormatException} with a message, nothing else; a decoded record encodes to a line
 * that decodes to the same line, and to the bytes Jackson's generator wrote ({@link JacksonRecordEncoding}). Inputs
 * whose first byte is odd get a valid checksum, so the JSON checks are reached.
 */
public final class RecordLineFuzzer {
    private RecordLineFuzzer() {
    }

    /** One input: the line (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String line = new String(input, StandardCharsets.UTF_8);
        if (!line.isEmpty() && (line.charAt(0) & 1) == 1 && line.length() > 10) {
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
        if (!again.equals(JacksonRecordEncoding.encode(r))) {
            throw new AssertionError("the direct encoding " + again + " is not Jackson's "
                    + JacksonRecordEncoding.encode(r));
        }
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
