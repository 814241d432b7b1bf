// Timeline view: one step as a Gantt chart, a lane per stream (see views.hpp).
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <algorithm>

#include "dtplan/cost/layout_text.hpp"
#include "views.hpp"

namespace dtplan::gui {

namespace {

constexpr double kWidth = 1100, kLane = 90, kLeft = 140, kTop = 72;
// Exposed communication: the hatched segments' outline and the band under the compute lane.
const QColor kExposed(139, 0, 0);

QColor color_of(const std::string& stream, const std::string& name) {
  if (stream == "tensor parallel") return QColor(214, 39, 40);
  if (stream == "context parallel") return QColor(227, 119, 194);
  if (stream == "expert parallel") return QColor(255, 187, 120);
  if (stream == "pipeline")
    return name.rfind("bubble", 0) == 0 ? QColor(199, 199, 199) : QColor(140, 86, 75);
  if (stream == "data parallel") return QColor(23, 190, 207);
  if (stream == "host") return QColor(188, 189, 34);    // offload: host <-> GPU copies
  if (stream != "compute") return QColor(214, 39, 40);  // communication
  if (name.find("forward + backward") != std::string::npos) return QColor(148, 103, 189);
  if (name.find("forward") != std::string::npos) return QColor(31, 119, 180);
  if (name.find("backward") != std::string::npos) return QColor(255, 127, 14);
  if (name.find("optimizer") != std::string::npos) return QColor(44, 160, 44);
  return QColor(148, 103, 189);
}

// The top of a stream's lane.
double lane_y(const QStringList& lanes, const std::string& stream) {
  return kTop + kLane * static_cast<double>(lanes.indexOf(QString::fromStdString(stream)));
}

// The streams in the order they first appear.
QStringList lanes_of(const std::vector<cost::TimelineEvent>& events) {
  QStringList out;
  for (const auto& e : events) {
    const auto name = QString::fromStdString(e.stream);
    if (!out.contains(name)) out << name;
  }
  return out;
}

// The lanes greyed out with why, when the session's strategy cannot run here (analysis.cpp put
// the reason in problems), instead of a blank view.
void draw_not_applicable(QGraphicsScene* s, const Analysis& a) {
  std::string why = "no step to draw";
  for (const auto& p : a.problems) {
    if (p.rfind("timeline: ", 0) == 0) why = p.substr(10);
  }
  s->addRect(kLeft, kTop, kWidth, 2 * kLane, QPen(Qt::gray), QBrush(QColor(225, 225, 225)));
  auto* text = s->addSimpleText(QString("%1: not applicable to this session\n%2")
                                    .arg(QString::fromStdString(a.session.strategy))
                                    .arg(QString::fromStdString(why)));
  text->setPos(kLeft + 10, kTop + kLane - 20);
}

// Communication the compute stream does not hide, hatched over its own lane.
void hatch_exposed(QGraphicsScene* s, const std::vector<cost::TimelineEvent>& events,
                   const QStringList& lanes, const std::function<double(double)>& x) {
  std::vector<std::pair<double, double>> busy;
  for (const auto& e : events) {
    if (e.stream == "compute") busy.push_back({e.start_s, e.end_s});
  }
  std::sort(busy.begin(), busy.end());
  for (const auto& e : events) {
    if (e.stream == "compute" || e.name.rfind("bubble", 0) == 0) continue;
    const double y = lane_y(lanes, e.stream) + 8;
    const double idle_y = lane_y(lanes, "compute") + kLane - 7;
    const auto hatch = [&](double from, double to) {
      const double w = std::max(1.0, x(to) - x(from));
      s->addRect(x(from), y, w, kLane - 16, QPen(kExposed, 2), QBrush(Qt::black, Qt::BDiagPattern));
      // The same interval under the compute lane: the stream that waits.
      s->addRect(x(from), idle_y, w, 4, QPen(Qt::NoPen), QBrush(kExposed));
    };
    double from = e.start_s;
    for (const auto& [b0, b1] : busy) {
      if (b1 <= from || b0 >= e.end_s) continue;
      if (b0 > from) hatch(from, b0);
      from = std::max(from, b1);
    }
    if (from < e.end_s) hatch(from, e.end_s);
  }
}

QString step_title(const Analysis& a);

// How far published runs of this kind were from dtplan (data/error_bands.json).
QString band_line(const Analysis& a) {
  if (!a.band) {
    return QString("\naccuracy: no published measurements of %1 runs")
        .arg(QString::fromStdString(a.band_group));
  }
  return QString(
             "\naccuracy: on %1 published runs of %2, predictions were off by %3% "
             "(median), %4%5% on average (+: optimistic)%6")
      .arg(a.band->rows)
      .arg(QString::fromStdString(a.band_group))
      .arg(a.band->median_abs_error * 100, 0, 'f', 1)
      .arg(a.band->bias >= 0 ? "+" : "")
      .arg(a.band->bias * 100, 0, 'f', 1)
      .arg(a.band->rows < planner::kFewBandRows ? "; so few runs are a weak guide" : "");
}

// The session's memory per GPU when it exceeds the GPU: the step drawn would not run.
QString fit_line(const Analysis& a) {
  double bytes = 0;
  if (a.layout) {
    bytes = static_cast<double>(a.layout->memory.total().value);
  } else {
    for (const auto& bar : a.memory) {
      if (name_of(bar.strategy) == a.session.strategy && bar.not_applicable.empty())
        bytes = static_cast<double>(bar.gpu.total().value);
    }
  }
  if (bytes <= a.capacity_bytes || a.capacity_bytes <= 0) return {};
  return QString("\ndoes NOT fit: %1 GiB per GPU of %2 (the memory view shows where it goes)")
      .arg(bytes / 1073741824.0, 0, 'f', 2)
      .arg(a.capacity_bytes / 1073741824.0, 0, 'f', 2);
}

QString title_of(const Analysis& a) {
  return step_title(a) + fit_line(a) + band_line(a);
}

// The unit of a title's times: seconds from a 2 s step up (the time axis switches there too),
// so that a 30 s step reads "30.12 s" rather than "30120.0 ms".
struct TitleUnit {
  double per_s;
  const char* name;
  int decimals;
};

TitleUnit unit_for(double step_s) {
  return step_s >= 2.0 ? TitleUnit{1.0, "s", 2} : TitleUnit{1e3, "ms", 1};
}

// The spacing of the time axis's ticks: 1, 2 or 5 times a power of ten, the smallest that
// leaves at most ten intervals over `span` (in the axis's unit).
double tick_step(double span) {
  if (!(span > 0)) return 1.0;
  const double raw = span / 10.0;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw * (1.0 - 1e-9)) return m * power;
  }
  return 10.0 * power;
}

QString step_title(const Analysis& a) {
  const auto& s = a.session;
  if (a.layout) {
    const auto& t = a.layout->time;
    const auto u = unit_for(t.step_s);
    const auto in = [&](double seconds, int extra = 0) {
      return QString::number(seconds * u.per_s, 'f', u.decimals + extra);
    };
    return QString(
               "%1, %2\nstep %3 %10 = %4 micro-batches x %5 %10 + bubble %6 + data parallel "
               "%7 + host transfers %8 + optimizer %9 %10")
        .arg(QString::fromStdString(s.model),
             QString::fromStdString(cost::describe(a.layout->layout)), in(t.step_s),
             QString::number(a.layout->layout.micro_batches), in(t.microbatch_s, 1), in(t.bubble_s),
             in(t.dp_sync_s), in(t.host_transfer_s), in(t.optimizer_s))
        .arg(u.name);
  }
  const auto& tm = a.step.times;
  const auto u = unit_for(tm.step_s);
  const auto in = [&](double seconds) {
    return QString::number(seconds * u.per_s, 'f', u.decimals);
  };
  return QString(
             "%1, %2: step %3 %8 = compute %4 + exposed communication %5 + optimizer %6 %8; "
             "hidden communication %7 %8; %9 micro-steps")
      .arg(QString::fromStdString(s.model), QString::fromStdString(s.strategy), in(tm.step_s),
           in(tm.compute_s), in(tm.exposed_comm_s), in(tm.optimizer_s), in(tm.hidden_comm_s))
      .arg(u.name)
      .arg(s.grad_accum);
}

void draw_legend(QGraphicsScene* s, double y, bool layout) {
  std::vector<std::pair<const char*, const char*>> legend{{"forward + backward", "compute"},
                                                          {"optimizer", "compute"}};
  if (layout) {
    legend.insert(legend.end(), {{"tensor parallel", "tensor parallel"},
                                 {"context parallel", "context parallel"},
                                 {"expert parallel", "expert parallel"},
                                 {"pipeline sends", "pipeline"},
                                 {"bubble", "pipeline"},
                                 {"data parallel", "data parallel"},
                                 {"host transfers", "host"}});
  } else {
    legend.insert(legend.begin(), {{"forward", "compute"}, {"backward", "compute"}});
    legend.emplace_back("communication", "communication");
  }
  double lx = kLeft;
  for (const auto& [name, stream] : legend) {
    s->addRect(lx, y, 14, 14, QPen(Qt::NoPen), QBrush(color_of(stream, name)));
    auto* text = s->addSimpleText(name);
    text->setPos(lx + 20, y - 2);
    lx += 20 + text->boundingRect().width() + 24;
  }
  s->addRect(kLeft, y + 30, 14, 14, QPen(kExposed, 2), QBrush(Qt::black, Qt::BDiagPattern));
  s->addSimpleText("exposed communication: the compute stream is idle (dark red under it)")
      ->setPos(kLeft + 20, y + 28);
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QGraphicsView(parent) {
  setScene(new QGraphicsScene(this));
  setRenderHint(QPainter::Antialiasing);
  setBackgroundBrush(Qt::white);
  setAlignment(Qt::AlignLeft | Qt::AlignTop);  // the title at the top, not mid-window
}

void TimelineView::show_analysis(const Analysis& a) {
  auto* s = scene();
  s->clear();
  drawn_events_ = 0;
  const auto& events = timeline_of(a);
  double end = 0;
  for (const auto& e : events)
    end = std::max(end, e.end_s);
  lanes_ = lanes_of(events);
  if (end <= 0) return draw_not_applicable(s, a);
  const auto x = [&](double t) { return kLeft + kWidth * t / end; };
  for (int i = 0; i < lanes_.size(); ++i)
    s->addSimpleText(lanes_[i])->setPos(10, kTop + kLane * i + kLane / 2 - 8);
  for (const auto& e : events) {
    if (!(e.end_s > e.start_s)) continue;  // nothing to draw
    const double y = lane_y(lanes_, e.stream);
    auto* r = s->addRect(x(e.start_s), y + 8, std::max(1.0, x(e.end_s) - x(e.start_s)), kLane - 16,
                         QPen(Qt::white), QBrush(color_of(e.stream, e.name)));
    r->setToolTip(QString("%1: %2 .. %3 ms")
                      .arg(QString::fromStdString(e.name))
                      .arg(e.start_s * 1e3, 0, 'f', 2)
                      .arg(e.end_s * 1e3, 0, 'f', 2));
    // Names inside the bars wide enough to hold them.
    auto* name = s->addSimpleText(QString::fromStdString(e.name));
    if (name->boundingRect().width() + 8 < x(e.end_s) - x(e.start_s)) {
      name->setBrush(Qt::white);
      name->setPos(x(e.start_s) + 4, y + kLane / 2 - 8);
    } else {
      delete name;
    }
    ++drawn_events_;
  }
  hatch_exposed(s, events, lanes_, x);
  const double bottom = kTop + kLane * static_cast<double>(lanes_.size());
  const auto unit = unit_for(end);
  const double step = tick_step(end * unit.per_s) / unit.per_s;  // round, in the axis's unit
  for (int i = 0; static_cast<double>(i) * step <= end * (1.0 + 1e-9); ++i) {
    const double t = static_cast<double>(i) * step;
    s->addLine(x(t), bottom, x(t), bottom + 6);
    s->addSimpleText(QString("%1 %2").arg(t * unit.per_s).arg(unit.name))
        ->setPos(x(t) - 20, bottom + 8);
  }
  title_ = title_of(a);
  s->addSimpleText(title_)->setPos(10, 10);
  draw_legend(s, bottom + 40, a.layout.has_value());
  s->setSceneRect(0, 0, kLeft + kWidth + 40, bottom + 100);
}

}  // namespace dtplan::gui
