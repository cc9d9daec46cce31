package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/** Idle times in audits, notices and status read the same whatever the JVM's locale (review38 noticed "2,5 h"). */
class IdleDurationTextTest {

    @Test
    void hoursUseAPointUnderAnyLocale() {
        Locale was = Locale.getDefault();
        try {
            Locale.setDefault(Locale.GERMANY);
            assertThat(IdleWatch.human(Duration.ofMinutes(150))).isEqualTo("2.5 h");
            assertThat(IdleWatch.human(Duration.ofMinutes(42))).isEqualTo("42 min");
            assertThat(IdleWatch.human(Duration.ofSeconds(50))).isEqualTo("50 s");
        } finally {
            Locale.setDefault(was);
        }
    }
}
