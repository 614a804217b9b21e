package eventlake.state;

import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * dropDuplicatesWithinWatermark's rows, with each key's expiry an event-time timer.
 *
 * <p>A key's first row is emitted and its expiry (the row's event time, rounded up to the
 * millisecond, plus the watermark's delay) kept in state with a timer; its later rows are
 * dropped until the watermark reaches the expiry and the timer clears the state. Spark
 * drops late rows before they get here. A row without an event time expires at once, as
 * in Spark (its time counts as 0).
 *
 * <p>Compiled by Janino (eventlake/jvm_code.py), which reads generics but does not check
 * them: raw types and casts, no lambdas.
 */
public final class FirstWithinWatermark extends StatefulProcessor {
    private final int timeIndex;
    private final long delayMs;
    private transient ValueState expiresAt;

    public FirstWithinWatermark(int timeIndex, long delayMs) {
        this.timeIndex = timeIndex;
        this.delayMs = delayMs;
    }

    public void init(OutputMode outputMode, TimeMode timeMode) {
        expiresAt = getHandle().getValueState("expires_at_ms", Encoders.LONG(), TTLConfig.NONE());
    }

    public scala.collection.Iterator handleInputRows(Object key, scala.collection.Iterator rows, TimerValues timers) {
        if (expiresAt.exists()) {
            return scala.collection.Iterator$.MODULE$.empty();
        }
        Row first = (Row) rows.next();
        long expiry = ceilMillis(first.get(timeIndex)) + delayMs;
        expiresAt.update(Long.valueOf(expiry));
        getHandle().registerTimer(expiry);
        return scala.collection.Iterator$.MODULE$.single(first);
    }

    public scala.collection.Iterator handleExpiredTimer(Object key, TimerValues timers, ExpiredTimerInfo info) {
        expiresAt.clear();
        return scala.collection.Iterator$.MODULE$.empty();
    }

    /** A timestamp's epoch milliseconds, rounded up (Spark's expiry is in microseconds). */
    static long ceilMillis(Object time) {
        long seconds;
        long nanos;
        if (time instanceof Timestamp) {
            Timestamp t = (Timestamp) time;
            seconds = Math.floorDiv(t.getTime(), 1000L);
            nanos = t.getNanos();
        } else if (time instanceof Instant) {
            Instant t = (Instant) time;
            seconds = t.getEpochSecond();
            nanos = t.getNano();
        } else if (time instanceof LocalDateTime) {
            Instant t = ((LocalDateTime) time).toInstant(ZoneOffset.UTC);
            seconds = t.getEpochSecond();
            nanos = t.getNano();
        } else {
            return 0L;
        }
        long micros = nanos / 1000L;
        return seconds * 1000L + (micros + 999L) / 1000L;
    }

    /** {@code df} grouped by {@code keys}, each group's first row within the watermark. */
    public static Dataset apply(Dataset df, List keys, String eventTime, long delayMs) {
        StructType schema = df.schema();
        Column[] columns = new Column[keys.size()];
        StructField[] keyFields = new StructField[keys.size()];
        for (int i = 0; i < keys.size(); i++) {
            String name = (String) keys.get(i);
            columns[i] = df.col(name);
            keyFields[i] = schema.apply(schema.fieldIndex(name));
        }
        int timeIndex = schema.fieldIndex(eventTime);
        return df.groupBy(columns)
            .as(Encoders.row(new StructType(keyFields)), Encoders.row(schema))
            .transformWithState(new FirstWithinWatermark(timeIndex, delayMs), eventTime,
                OutputMode.Append(), Encoders.row(schema));
    }
}
