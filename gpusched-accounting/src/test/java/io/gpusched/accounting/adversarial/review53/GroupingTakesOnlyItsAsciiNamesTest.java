package io.gpusched.accounting.adversarial.review53;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.accounting.UsageReport.GroupBy;
import org.junit.jupiter.api.Test;

/**
 * Review 53: {@code --by} ({@code gpusched report}) and {@code ?by=} ({@code /api/v1/usage}) take owner, allocation,
 * device or day. {@link GroupBy#parse} upper-cases the input before matching, and {@code String.toUpperCase} maps the
 * Turkish dotless i (U+0131) to a plain {@code I}: {@code --by dev\u0131ce} and {@code --by allocat\u0131on}, which
 * are not the names (a look-alike pasted from a document or typed under a Turkish layout), are taken as device and
 * allocation instead of refused. The times of the same report insist on ASCII ({@code ReportTimes}: "ASCII digits
 * only"; the Arabic-Indic {@code \u0663d} is refused by the existing tests); the grouping should too.
 */
class GroupingTakesOnlyItsAsciiNamesTest {

    @Test
    void aLookAlikeWithADotlessIIsRefusedNamingTheValidGroupings() {
        for (String s : new String[]{"dev\u0131ce", "allocat\u0131on"}) {
            Throwable refused = catchThrowable(() -> GroupBy.parse(s));
            assertThat(refused)
                    .as("--by %s (U+0131, not an ASCII i): expected IllegalArgumentException naming owner,"
                            + " allocation, device, day; it was taken as a grouping", s)
                    .isNotNull()
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("owner, allocation, device, day");
        }
    }
}
