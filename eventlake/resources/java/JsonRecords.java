package eventlake.transforms;

import java.io.ByteArrayInputStream;
import java.io.Serializable;

import com.fasterxml.jackson.core.JsonFactory;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.json.CreateJacksonParser;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.util.FailureSafeParser;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.immutable.List;
import scala.collection.immutable.Map;
import scala.collection.immutable.Nil$;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;

/**
 * JSON text to a struct, as Spark's {@code from_json} does it, read from the text's bytes.
 *
 * <p>Spark 4.2's {@code from_json} gives Jackson each record through a new
 * {@code InputStreamReader}, which allocates an 8 KiB buffer and a UTF-8 decoder per
 * record: about a tenth of a Kafka -> Delta scan's CPU in a profile of 1M records. This
 * hands Jackson a stream over the record's bytes instead and keeps everything else of
 * {@code from_json}: the same {@code JacksonParser}, options, parse modes and
 * corrupt-record column. A record Jackson might read otherwise from bytes than from text (a
 * byte order mark, a zero byte in the first four), and one that fails from bytes (e.g. not
 * valid UTF-8, which the reader turns into U+FFFD), is parsed again from text: every row
 * is {@code from_json}'s.
 *
 * <p>Compiled by Janino (eventlake/jvm_code.py): raw types, no lambdas.
 */
public final class JsonRecords implements Serializable {
    private final StructType schema;
    private final Map options;
    private final String timeZone;
    private final String corruptDefault;
    private transient FailureSafeParser parser;

    public JsonRecords(StructType schema, Map options, String timeZone, String corruptDefault) {
        this.schema = schema;
        this.options = options;
        this.timeZone = timeZone;
        this.corruptDefault = corruptDefault;
    }

    /** The record's row (the schema's struct), or null for a record that yields none. */
    public Object evaluate(UTF8String json) {
        if (parser == null) {
            parser = build();
        }
        scala.collection.Iterator rows = parser.parse(json);
        return rows.hasNext() ? rows.next() : null;
    }

    private FailureSafeParser build() {
        JSONOptions parsed = new JSONOptions(options, timeZone, corruptDefault);
        String corrupt = parsed.columnNameOfCorruptRecord();
        StructField[] fields = schema.fields();
        java.util.ArrayList kept = new java.util.ArrayList();
        for (int i = 0; i < fields.length; i++) {
            if (!fields[i].name().equals(corrupt)) {
                kept.add(fields[i]);
            }
        }
        StructType actual = new StructType((StructField[]) kept.toArray(new StructField[0]));
        JacksonParser raw = new JacksonParser(actual, parsed, false, (List) Nil$.MODULE$);
        return new FailureSafeParser(new Parse(raw), parsed.parseMode(), schema, corrupt);
    }

    /**
     * {@code from_json(json, schema, options)}: a column of {@code schema} (made nullable),
     * the session's time zone and default corrupt-record column name given.
     */
    public static Column column(
            Column json, StructType schema, java.util.Map options, String timeZone,
            String corruptDefault) {
        Map scalaOptions = (Map) scala.collection.immutable.Map$.MODULE$.empty();
        java.util.Iterator it = options.entrySet().iterator();
        while (it.hasNext()) {
            java.util.Map.Entry e = (java.util.Map.Entry) it.next();
            scalaOptions = (Map) scalaOptions.updated(e.getKey(), e.getValue());
        }
        StructType nullable = schema.asNullable();
        JsonRecords records = new JsonRecords(nullable, scalaOptions, timeZone, corruptDefault);
        Expression target = new Literal(records, new ObjectType(JsonRecords.class));
        List args = ((List) Nil$.MODULE$).$colon$colon(ExpressionUtils.expression(json));
        Invoke invoke = new Invoke(
            target, "evaluate", nullable, args, (List) Nil$.MODULE$, true, true, true);
        return ExpressionUtils.column(invoke);
    }

    /** One record through Jackson: read from its bytes, else as from_json reads it. */
    static final class Parse extends AbstractFunction1 implements Serializable {
        private final JacksonParser raw;
        private final Bytes bytes = new Bytes();
        private final Reader reader = new Reader();
        private final Same same = new Same();

        Parse(JacksonParser raw) {
            this.raw = raw;
        }

        public Object apply(Object record) {
            if (Bytes.plain((UTF8String) record)) {
                try {
                    return raw.parse(record, bytes, same);
                } catch (Exception e) {
                    if (e instanceof RuntimeException) {
                        throw (RuntimeException) e;
                    }
                    // A BadRecordException (the only checked one): parsed again below as
                    // text, which gives from_json's row or its failure.
                }
            }
            return raw.parse(record, reader, same);
        }
    }

    /** from_json's way: the record through a UTF-8 reader. */
    static final class Reader extends AbstractFunction2 implements Serializable {
        public Object apply(Object factory, Object record) {
            return CreateJacksonParser.utf8String((JsonFactory) factory, (UTF8String) record);
        }
    }

    static final class Bytes extends AbstractFunction2 implements Serializable {
        /**
         * Whether Jackson reads these bytes as the reader would read their text: no byte
         * order mark and no zero byte in the first four, from which Jackson would guess
         * UTF-16 or UTF-32.
         */
        static boolean plain(UTF8String text) {
            int n = Math.min(4, text.numBytes());
            if (n == 0) {
                return false;
            }
            for (int i = 0; i < n; i++) {
                byte b = text.getByte(i);
                if (b == 0 || (i == 0 && (b == (byte) 0xEF || b == (byte) 0xFE || b == (byte) 0xFF))) {
                    return false;
                }
            }
            return true;
        }

        public Object apply(Object factory, Object record) {
            // A stream over the bytes, not the array itself: from an array as its source,
            // JacksonParser's exact string parsing cuts a number's or an object's text for
            // a STRING field out of the bytes ("12.50"), where from_json, whose source is a
            // reader, writes the parsed value again ("12.5"), as this does.
            UTF8String text = (UTF8String) record;
            Object base = text.getBaseObject();
            java.io.InputStream in;
            if (base instanceof byte[]) {
                long offset = text.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET;
                in = new ByteArrayInputStream((byte[]) base, (int) offset, text.numBytes());
            } else {
                in = new ByteArrayInputStream(text.getBytes());
            }
            try {
                return ((JsonFactory) factory).createParser(in);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }

    static final class Same extends AbstractFunction1 implements Serializable {
        public Object apply(Object record) {
            return record;
        }
    }
}
