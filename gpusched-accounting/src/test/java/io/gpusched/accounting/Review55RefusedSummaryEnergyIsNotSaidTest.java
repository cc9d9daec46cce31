package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.DaySummary;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

/**
 * Review 55: "what the hardware cannot tell is said" and "bad records are refused with a named reason". An interval's
 * device whose energy is more than a GPU can draw is read with its energy "not measured" and a note that says so
 * ({@link RecordCodec#ENERGY_REFUSED}). A day summary row ({@code k: d}) with the same energy is read with its energy
 * set to 0 and nothing said: since 04908e41 summary rows carry {@code notes}, and a report over a compacted day reads a
 * row's notes "the same as from the day's intervals" (docs/ACCOUNTING.md, the d row), yet it shows 0 kWh as a measured
 * figure, where the same device over intervals shows the refusal.
 */
class Review55RefusedSummaryEnergyIsNotSaidTest {
    private static final String FIGURES = "\"held\":60000,\"meas\":60000,\"um\":0,\"us\":0.0,\"idle\":0,"
            + "\"e\":999999999999,\"ee\":0,\"em\":60000";

    @Test
    void aSummaryOwnerRowsRefusedEnergyIsNoted() {
        DaySummary s = (DaySummary) RecordCodec.decode(line("{\"k\":\"d\",\"day\":\"2026-05-02\",\"owner\":\"alice\","
                + "\"n\":1," + FIGURES + ",\"gpus\":[0]}"));
        assertThat(s.figures().energyMillijoules()).as("its energy is not taken (the premise)").isZero();
        assertThat(intervalNotes()).as("the same figures on an interval's device are noted (the premise)")
                .anyMatch(x -> x.startsWith(RecordCodec.ENERGY_REFUSED));
        assertThat(s.notes())
                .as("a summary owner row with 1e12 mJ over 60 s (more than %s W): expected its energy read as not"
                        + " measured with the note an interval's device gets (\"%s\"), so report --by owner over the"
                        + " compacted day says why its energy is missing; the row's energy is set to 0 silently",
                        UsageMeter.MAX_PLAUSIBLE_WATTS, RecordCodec.ENERGY_REFUSED)
                .anyMatch(x -> x.startsWith(RecordCodec.ENERGY_REFUSED));
    }

    @Test
    void aSummaryGpuRowsRefusedEnergyIsNoted() {
        DaySummary s = (DaySummary) RecordCodec.decode(line("{\"k\":\"d\",\"day\":\"2026-05-02\",\"i\":0,"
                + "\"uuid\":\"GPU-0\",\"n\":1," + FIGURES + "}"));
        assertThat(s.figures().energyMillijoules()).as("its energy is not taken (the premise)").isZero();
        assertThat(intervalNotes()).as("the same figures on an interval's device are noted (the premise)")
                .anyMatch(x -> x.startsWith(RecordCodec.ENERGY_REFUSED));
        assertThat(s.notes())
                .as("a summary GPU row with 1e12 mJ over 60 s: expected the note \"%s\" (report --by device over the"
                        + " compacted day); the row's energy is set to 0 silently", RecordCodec.ENERGY_REFUSED)
                .anyMatch(x -> x.startsWith(RecordCodec.ENERGY_REFUSED));
    }

    /** @return the notes of an interval's device with the same figures */
    private static List<String> intervalNotes() {
        Interval iv = (Interval) RecordCodec.decode(line("{\"k\":\"i\",\"id\":\"a1-1\",\"owner\":\"alice\",\"from\":"
                + "1777680000000,\"to\":1777680060000,\"first\":true,\"gpus\":[{\"i\":0,\"uuid\":\"GPU-0\"," + FIGURES
                + "}]}"));
        return iv.devices().get(0).notes();
    }

    private static String line(String json) {
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return String.format("%08x", c.getValue()) + " " + json;
    }
}
