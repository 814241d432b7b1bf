// Timeline view: one step as a Gantt chart per stream (see views.hpp).
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <algorithm>

#include "views.hpp"

namespace dtplan::gui {

namespace {

QColor color_of(const std::string& stream, const std::string& name) {
  if (stream != "compute") return QColor(214, 39, 40);
  if (name.find("forward + backward") != std::string::npos) return QColor(148, 103, 189);
  if (name.find("forward") != std::string::npos) return QColor(31, 119, 180);
  if (name.find("backward") != std::string::npos) return QColor(255, 127, 14);
  if (name.find("optimizer") != std::string::npos) return QColor(44, 160, 44);
  return QColor(148, 103, 189);
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QGraphicsView(parent) {
  setScene(new QGraphicsScene(this));
  setRenderHint(QPainter::Antialiasing);
  setBackgroundBrush(Qt::white);
}

void TimelineView::show_analysis(const Analysis& a) {
  auto* s = scene();
  s->clear();
  drawn_events_ = 0;
  const auto& events = a.step.timeline;
  double end = 0;
  for (const auto& e : events)
    end = std::max(end, e.end_s);
  const double width = 1100, lane = 110, left = 140, top = 60;
  if (end <= 0) {
    // The session's strategy cannot run here (analysis.cpp put the reason in problems): the
    // lanes greyed out, with why, instead of a blank view.
    std::string why = "no step to draw";
    for (const auto& p : a.problems) {
      if (p.rfind("timeline: ", 0) == 0) why = p.substr(10);
    }
    s->addRect(left, top, width, 2 * lane, QPen(Qt::gray), QBrush(QColor(225, 225, 225)));
    auto* text = s->addSimpleText(QString("%1: not applicable to this session\n%2")
                                      .arg(QString::fromStdString(a.session.strategy))
                                      .arg(QString::fromStdString(why)));
    text->setPos(left + 10, top + lane - 20);
    return;
  }
  const auto x = [&](double t) { return left + width * t / end; };
  const std::vector<std::string> lanes{"compute", "communication"};
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    auto* label = s->addSimpleText(QString::fromStdString(lanes[i]));
    label->setPos(10, top + lane * static_cast<double>(i) + 20);
  }
  for (const auto& e : events) {
    const auto row = e.stream == "compute" ? 0 : 1;
    auto* r =
        s->addRect(x(e.start_s), top + lane * row + 8, std::max(1.0, x(e.end_s) - x(e.start_s)),
                   lane - 16, QPen(Qt::white), QBrush(color_of(e.stream, e.name)));
    r->setToolTip(QString("%1: %2 .. %3 ms")
                      .arg(QString::fromStdString(e.name))
                      .arg(e.start_s * 1e3, 0, 'f', 2)
                      .arg(e.end_s * 1e3, 0, 'f', 2));
    // Names inside the bars wide enough to hold them.
    auto* name = s->addSimpleText(QString::fromStdString(e.name));
    if (name->boundingRect().width() + 8 < x(e.end_s) - x(e.start_s)) {
      name->setBrush(Qt::white);
      name->setPos(x(e.start_s) + 4, top + lane * row + lane / 2 - 8);
    } else {
      delete name;
    }
    ++drawn_events_;
  }
  // Communication the compute stream does not hide, hatched over the communication lane.
  std::vector<std::pair<double, double>> busy;
  for (const auto& e : events) {
    if (e.stream == "compute") busy.push_back({e.start_s, e.end_s});
  }
  std::sort(busy.begin(), busy.end());
  for (const auto& e : events) {
    if (e.stream == "compute") continue;
    double from = e.start_s;
    for (const auto& [b0, b1] : busy) {
      if (b1 <= from || b0 >= e.end_s) continue;
      if (b0 > from) {
        s->addRect(x(from), top + lane + 8, x(b0) - x(from), lane - 16, QPen(Qt::black),
                   QBrush(Qt::black, Qt::BDiagPattern));
      }
      from = std::max(from, b1);
    }
    if (from < e.end_s) {
      s->addRect(x(from), top + lane + 8, std::max(1.0, x(e.end_s) - x(from)), lane - 16,
                 QPen(Qt::black), QBrush(Qt::black, Qt::BDiagPattern));
    }
  }
  // Time axis: ten ticks.
  for (int i = 0; i <= 10; ++i) {
    const double t = end * i / 10;
    s->addLine(x(t), top + 2 * lane, x(t), top + 2 * lane + 6);
    auto* tick = s->addSimpleText(QString("%1 ms").arg(t * 1e3, 0, 'f', 1));
    tick->setPos(x(t) - 20, top + 2 * lane + 8);
  }
  const auto& tm = a.step.times;
  auto* title = s->addSimpleText(
      QString("%1, %2: step %3 ms = compute %4 + exposed communication %5 + optimizer %6 ms; "
              "hidden communication %7 ms; %8 micro-steps")
          .arg(QString::fromStdString(a.session.model))
          .arg(QString::fromStdString(a.session.strategy))
          .arg(tm.step_s * 1e3, 0, 'f', 1)
          .arg(tm.compute_s * 1e3, 0, 'f', 1)
          .arg(tm.exposed_comm_s * 1e3, 0, 'f', 1)
          .arg(tm.optimizer_s * 1e3, 0, 'f', 1)
          .arg(tm.hidden_comm_s * 1e3, 0, 'f', 1)
          .arg(a.session.grad_accum));
  title->setPos(10, 10);
  const char* legend[][2] = {{"forward", "compute"},
                             {"backward", "compute"},
                             {"forward + backward (middle micro-steps)", "compute"},
                             {"optimizer", "compute"},
                             {"communication", "communication"}};
  double lx = left;
  for (const auto& entry : legend) {
    s->addRect(lx, top + 2 * lane + 40, 14, 14, QPen(Qt::NoPen),
               QBrush(color_of(entry[1], entry[0])));
    auto* text = s->addSimpleText(entry[0]);
    text->setPos(lx + 20, top + 2 * lane + 38);
    lx += 20 + text->boundingRect().width() + 30;
  }
  auto* hatch = s->addRect(left, top + 2 * lane + 70, 14, 14, QPen(Qt::black),
                           QBrush(Qt::black, Qt::BDiagPattern));
  (void)hatch;
  s->addSimpleText("exposed communication (the compute stream is idle)")
      ->setPos(left + 20, top + 2 * lane + 68);
  s->setSceneRect(0, 0, left + width + 40, top + 2 * lane + 100);
}

}  // namespace dtplan::gui
