package io.gpusched.accounting;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.gpusched.accounting.AccountingRecord.Checkpoint;
import io.gpusched.accounting.AccountingRecord.DaySummary;
import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.IdleCount;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.zip.CRC32C;

/**
 * The reference for {@link RecordCodec#encode}: the encoder as it was written with Jackson's streaming generator (the
 * same factory defaults as the codec's), kept so tests check that the direct writer writes the same bytes.
 */
public final class JacksonRecordEncoding {
    private static final JsonFactory FACTORY = new JsonFactory();

    private JacksonRecordEncoding() {
    }

    /**
     * @param r a record
     * @return the line {@code RecordCodec.encode} wrote with Jackson's generator before it wrote JSON directly
     */
    public static String encode(AccountingRecord r) {
        StringWriter w = new StringWriter(256);
        try (JsonGenerator g = FACTORY.createGenerator(w)) {
            g.writeStartObject();
            if (r instanceof Interval i) {
                g.writeStringField("k", "i");
                g.writeStringField("id", clip(i.allocationId()));
                writeOwner(g, i.owner(), i.ownerUid());
                if (i.jobId().isPresent()) {
                    g.writeStringField("job", clip(i.jobId().get()));
                }
                g.writeNumberField("from", i.from().toEpochMilli());
                g.writeNumberField("to", i.to().toEpochMilli());
                if (i.first()) {
                    g.writeBooleanField("first", true);
                }
                if (i.end().isPresent()) {
                    g.writeStringField("end", i.end().get());
                }
                if (i.gap()) {
                    g.writeBooleanField("gap", true);
                }
                if (i.idleSince().isPresent()) {
                    g.writeNumberField("idle", i.idleSince().get().toEpochMilli());
                }
                g.writeArrayFieldStart("gpus");
                for (DeviceUsage d : i.devices()) {
                    g.writeStartObject();
                    g.writeNumberField("i", d.index());
                    g.writeStringField("uuid", clip(d.uuid()));
                    writeFigures(g, d.figures());
                    if (d.counterAtEnd().isPresent()) {
                        g.writeNumberField("ec", d.counterAtEnd().getAsLong());
                    }
                    if (!d.notes().isEmpty()) {
                        g.writeArrayFieldStart("notes");
                        for (String n : d.notes()) {
                            g.writeString(clip(n));
                        }
                        g.writeEndArray();
                    }
                    g.writeEndObject();
                }
                g.writeEndArray();
            } else if (r instanceof Checkpoint c) {
                g.writeStringField("k", "c");
                g.writeNumberField("at", c.at().toEpochMilli());
                g.writeArrayFieldStart("open");
                for (String id : c.open()) {
                    g.writeString(clip(id));
                }
                g.writeEndArray();
                if (c.judged().isPresent()) {
                    g.writeNumberField("judged", c.judged().get().toEpochMilli());
                }
            } else if (r instanceof IdleAction a) {
                g.writeStringField("k", "a");
                g.writeNumberField("at", a.at().toEpochMilli());
                g.writeStringField("id", clip(a.allocationId()));
                if (a.owner().isPresent()) {
                    g.writeStringField("owner", clip(a.owner().get()));
                }
                g.writeStringField("action", a.action().name());
                g.writeNumberField("idleFor", a.idleFor().toMillis());
                g.writeStringField("detail", a.detail().length() > RecordCodec.MAX_TEXT ? a.detail()
                        .substring(0, RecordCodec.MAX_TEXT) : a.detail());
            } else if (r instanceof IdleCount c) {
                g.writeStringField("k", "p");
                g.writeNumberField("at", c.at().toEpochMilli());
                g.writeStringField("id", clip(c.allocationId()));
                g.writeNumberField("start", c.start().toEpochMilli());
                g.writeNumberField("idle", c.idle().toMillis());
                if (c.sinceWarning().isPresent()) {
                    g.writeNumberField("warned", c.sinceWarning().get().toMillis());
                }
            } else if (r instanceof DaySummary s) {
                g.writeStringField("k", "d");
                g.writeStringField("day", s.day().toString());
                writeOwner(g, s.owner(), s.ownerUid());
                if (s.index().isPresent()) {
                    g.writeNumberField("i", s.index().getAsInt());
                    g.writeStringField("uuid", clip(s.uuid().orElse("-")));
                }
                g.writeNumberField("n", s.allocations());
                if (s.parts() > 1) {
                    g.writeNumberField("parts", Math.min(s.parts(), RecordCodec.MAX_PARTS));
                }
                writeFigures(g, s.figures());
                if (!s.gpus().isEmpty()) {
                    g.writeArrayFieldStart("gpus");
                    for (int i : s.gpus()) {
                        g.writeNumber(i);
                    }
                    g.writeEndArray();
                }
                if (!s.notes().isEmpty()) {
                    g.writeArrayFieldStart("notes");
                    for (String n : s.notes()) {
                        g.writeString(clip(n));
                    }
                    g.writeEndArray();
                }
            }
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        String json = w.toString();
        return String.format("%08x", crc(json.getBytes(StandardCharsets.UTF_8))) + " " + json;
    }

    private static void writeOwner(JsonGenerator g, Optional<String> owner, OptionalLong uid) throws IOException {
        if (owner.isPresent()) {
            g.writeStringField("owner", clip(owner.get()));
        }
        if (uid.isPresent()) {
            g.writeNumberField("uid", uid.getAsLong());
        }
    }

    private static void writeFigures(JsonGenerator g, UsageFigures f) throws IOException {
        g.writeNumberField("held", f.heldMillis);
        g.writeNumberField("meas", f.measuredMillis);
        g.writeNumberField("um", f.utilizationMillis);
        g.writeNumberField("us", f.utilizationPercentMillis);
        if (f.utilizationPeak >= 0) {
            g.writeNumberField("up", f.utilizationPeak);
        }
        g.writeNumberField("idle", f.idleMillis);
        if (f.memoryPeakBytes >= 0) {
            g.writeNumberField("mp", f.memoryPeakBytes);
        }
        g.writeNumberField("e", f.energyMillijoules);
        g.writeNumberField("ee", f.estimatedMillijoules);
        g.writeNumberField("em", f.energyMillis);
    }

    /** @return a text the reader accepts: cut to {@link #RecordCodec.MAX_TEXT} characters, never empty */
    private static String clip(String s) {
        if (s.isEmpty()) {
            return "-";
        }
        return s.length() > RecordCodec.MAX_TEXT ? s.substring(0, RecordCodec.MAX_TEXT) : s;
    }

    private static int crc(byte[] b) {
        CRC32C c = new CRC32C();
        c.update(b, 0, b.length);
        return (int) c.getValue();
    }
}
